"""README.md's "Protocol 2" section is rendered from the kept studies (bench/readme_protocol2.py),
and follows bench/protocol-2.md's rule: a cell shows its progress, and only a finished cell
shows differences and verdicts, the service's own."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.bench import RESULTS, ROOT, load

# A finished table study the service ran (issue 42): 3 arms, 3 seeds, its whole result.
FINISHED = RESULTS / "table-penguins-study.json"
KEPT_AT = "2026-11-27T20:00:00+00:00"


@pytest.fixture(scope="module")
def p2() -> ModuleType:
    return load("readme_protocol2")


def kept(folder: Path, name: str, study: dict[str, Any]) -> None:
    """What bench/study_records.py writes beside a cell's runs."""
    (folder / "studies").mkdir(parents=True, exist_ok=True)
    body = {**study, "kept_at": KEPT_AT}
    (folder / "studies" / f"{name}.json").write_text(json.dumps(body))


def test_readme_section_is_the_rendered_records(p2: ModuleType) -> None:
    readme = (ROOT / "README.md").read_text()
    assert p2.section_of(readme, p2.HEADING) == p2.render()


def test_a_finished_cell_shows_the_services_result(p2: ModuleType, tmp_path: Path) -> None:
    study = json.loads(FINISHED.read_text())
    kept(tmp_path, "p2-penguins", study)
    text = p2.render(tmp_path)
    cell = text.split("### Cell 2", 1)[1]
    arms = study["result"]["comparison"]["arms"]
    for arm in arms[1:]:
        assert arm["verdict"] in cell  # the service's sentence, not one of the README's own
        boot = arm["primary_tests"][0]["ci_boot"]
        assert f"⟨{boot['low']:+.3g}, {boot['high']:+.3g}⟩" in cell, arm["arm"]
        secondary = arm["secondary"][0]
        assert f"- {arm['arm']}, secondary (Benjamini–Hochberg): {secondary['metric']}" in cell
    assert study["result"]["power"]["statement"] in cell
    # The headline (its sentences: tests/checks/test_cell_headline.py) opens the cell.
    assert cell.split("\n\n")[1] == load("cell_headline").headline(study["result"])[0]
    assert "gradient boosting (reference)" in cell
    spec, train = study["spec"], study["spec"]["base"]["train"]
    assert f"`{spec['base']['model']['source']}`, {train['steps']} steps of batch" in cell
    assert f"no tuning (lr {train['lr']:g}), {len(spec['seeds'])} seeds per arm" in cell
    assert f"decoding {spec['decoding']}." in cell  # what the verdicts rest on
    assert "Running" not in cell and "Not started" in text.split("### Cell 2", 1)[0]


def test_a_running_cell_shows_progress_and_no_verdict(p2: ModuleType, tmp_path: Path) -> None:
    study = json.loads(FINISHED.read_text())
    ended = [r for r in study["runs"] if r["kind"] == "job" and r["status"] == "succeeded"]
    study["runs"] = study["runs"][:-1]  # one run still to come
    kept(tmp_path, "p2-jsonl", {**study, "status": "running", "finished_at": None})
    text = p2.render(tmp_path).split("### Cell 2", 1)[0]
    assert f"{len(ended) - 1} of {len(study['arms']) * len(study['seeds'])} evaluation runs" in text
    for arm in study["result"]["comparison"]["arms"]:
        assert arm["verdict"] not in text and "p (Holm)" not in text
    span = datetime.fromisoformat(KEPT_AT) - datetime.fromisoformat(study["created_at"])
    assert "**Running**" in text and f"{span.total_seconds() / 3600:.1f} h when last kept" in text
    assert "taken over" not in text
    # Resumed on another service: how many of its ended jobs ran elsewhere is said.
    for run in ended[:3]:
        run["kept_from"] = "job-elsewhere"
    kept(tmp_path, "p2-jsonl", {**study, "status": "running", "finished_at": None})
    text = p2.render(tmp_path).split("### Cell 2", 1)[0]
    assert "resumed with 3 finished jobs taken over from earlier services" in text


def test_the_kept_study_is_never_read_as_a_run(tmp_path: Path) -> None:
    """readme_pretrained reads every *.json of the records folder as a run record: the
    study lives in a folder of its own beside them."""
    kept(tmp_path, "p2-jsonl", json.loads(FINISHED.read_text()))
    assert load("readme_pretrained").load_runs(tmp_path) == ([], [])


def test_summary_json_is_the_rendered_records(p2: ModuleType) -> None:
    assert (p2.RECORDS / "summary.json").read_text() == p2.summary_text()


def test_summary_holds_runs_and_a_finished_cells_tests(p2: ModuleType, tmp_path: Path) -> None:
    study = json.loads(FINISHED.read_text())
    kept(tmp_path, "p2-penguins", study)
    run = next(r for r in study["runs"] if r["kind"] == "job" and r["status"] == "succeeded")
    (tmp_path / "some-run.json").write_text(json.dumps({"job_id": run["job_id"]}))
    kept(tmp_path, "p2-jsonl", {**study, "status": "running", "finished_at": None})
    found = p2.summary(tmp_path)
    assert found["runs"] == ["some-run.json"]  # the records, never summary.json itself
    cell = found["cells"]["p2-penguins"]
    assert len(cell["runs"]) == len(study["runs"]) and cell["id"] == study["id"]
    assert [r["record"] for r in cell["runs"] if r["record"]] == ["some-run.json"]
    arms = study["result"]["comparison"]["arms"][1:]
    for mine, theirs in zip(cell["tests"]["arms"], arms, strict=True):
        holm = [t["p_holm"] for t in mine["primary_tests"]]
        assert holm == [t["p_holm"] for t in theirs["primary_tests"]], theirs["arm"]
        assert [t["p_bh"] for t in mine["secondary"]] == [t["p_bh"] for t in theirs["secondary"]]
        assert mine["verdict"] == theirs["verdict"]
    assert cell["tests"]["power"]["statement"] == study["result"]["power"]["statement"]
    assert found["cells"]["p2-jsonl"]["tests"] is None  # running: no test shown yet
    (tmp_path / "summary.json").write_text(p2.summary_text(tmp_path))
    assert load("readme_pretrained").load_runs(tmp_path)[0] == [{"job_id": run["job_id"]}]


def test_secondaries_in_plain_words_read_the_sign(p2: ModuleType) -> None:
    """Only the registered secondaries, with BH recomputed over them alone."""
    result = json.loads(FINISHED.read_text())["result"]
    arm = result["comparison"]["arms"][1]
    lower, higher = arm["secondary"][1], arm["secondary"][0]  # median_rel_error, within_5pct
    assert (lower["higher_is_better"], higher["higher_is_better"]) == (False, True)
    lower.update(diff=0.5, p=0.01)  # a larger error: worse
    higher.update(diff=0.1, p=0.04)  # more within 5 %: better (BH over two: q 0.04)
    two = (higher["metric"], lower["metric"])
    line = p2.secondary_lines(result, two)[0]
    assert f"`{arm['arm']}` against `ce` on the protocol's 2 registered secondaries" in line
    assert f"better on {higher['metric']}; worse on {lower['metric']}" in line
    assert "; no difference on none." in line and "(q 0.02)" in line and "(q 0.04)" in line
    # Over three, the larger p no longer passes: 0.04 x 3 / 2 = 0.06.
    three = (*two, arm["secondary"][2]["metric"])
    three_line = p2.secondary_lines(result, three)[0]
    assert f"better on none; worse on {lower['metric']}; no difference on " in three_line
    assert f"no difference on {higher['metric']}, {three[2]}." in three_line
    lower.update(diff=-0.5)  # a smaller error: better, and nothing worse
    assert "worse on none" in p2.secondary_lines(result, two)[0]


def test_a_resumed_cell_sums_its_runs_times_and_finds_their_records(
    p2: ModuleType, tmp_path: Path
) -> None:
    """A study resumed from kept work began after some of its runs had ended elsewhere: its
    span is not the cell's wall time, and a run it took over is kept under the job that
    trained it."""
    study = json.loads(FINISHED.read_text())
    jobs = [r for r in study["runs"] if r["kind"] == "job"]
    walls = [600.0 + 60 * i for i in range(len(jobs))]
    for i, (run, wall) in enumerate(zip(jobs, walls, strict=True)):
        trained_by = f"job-elsewhere-{i}" if i < 2 else run["job_id"]
        if i < 2:
            run["kept_from"] = trained_by
        record = {"job_id": trained_by, "wall_s": wall}
        (tmp_path / f"run-{i}.json").write_text(json.dumps(record))
    kept(tmp_path, "p2-penguins", study)
    cell = p2.render(tmp_path).split("### Cell 2", 1)[1]
    hours = sum(walls) / 3600
    assert f"- Wall time: {hours:.1f} h of evaluation runs, the {len(jobs)} runs' own" in cell
    assert "was resumed from kept work, so its own span is not the cell's" in cell
    runs = p2.summary(tmp_path)["cells"]["p2-penguins"]["runs"]
    found = {r["record"]: r.get("kept_from") for r in runs if r["kind"] == "job"}
    assert found == {f"run-{i}.json": (f"job-elsewhere-{i}" if i < 2 else None)
                     for i in range(len(jobs))}  # fmt: skip
    (tmp_path / "run-0.json").unlink()  # a run with no record: no wall time is made up
    with pytest.raises(SystemExit, match="job-elsewhere-0"):
        p2.render(tmp_path)
