"""Issue 42 item 4: the gradient-boosting reference of a table study, fitted on the job's own
training rows and scored on its held-out rows per seed, shown beside the arms."""

from __future__ import annotations

import random
from pathlib import Path
from statistics import median
from typing import Any

import pytest

from jobs.data.table import split_table
from jobs.reference import fit_reference, gbm
from jobs.spec import DataSpec, JobSpec, StudySpec
from service.cli.studies import render as cli_render
from service.store import JobRow, StudyRow
from service.studies import result
from service.studies.reference import NOTE, reference

PENGUINS = DataSpec(task="table", path="bundled:penguins", target="body_mass_g", eval_size=64)


@pytest.fixture(scope="module")
def penguins() -> dict[str, Any]:
    return fit_reference(split_table(PENGUINS), PENGUINS, [0, 1, 2])


def test_on_real_penguins_it_beats_the_median_and_its_interval_is_honest(
    penguins: dict[str, Any],
) -> None:
    split = split_table(PENGUINS)
    train = [split.target.values[i] for i in split.train]
    held = [split.target.values[i] for i in split.held]
    guess = median(train)
    naive = sum(abs(y - guess) for y in held) / len(held)  # ~640 g
    assert penguins["mean"]["mae"] < 0.6 * naive  # ~280 g: it learned from the features
    assert penguins["features"]["species"] == "categorical"
    assert penguins["features"]["flipper_length_mm"] == "numeric"
    assert (penguins["train_rows"], penguins["test_rows"]) == (278, 64)
    runs = penguins["runs"]
    assert [r["seed"] for r in runs] == [0, 1, 2]
    # The trees are deterministic: seeds differ only in the carved calibration rows.
    assert len({r["metrics"]["mae"] for r in runs}) == 1
    assert len({r["metrics"]["interval_score_90"] for r in runs}) > 1
    assert 0.75 <= penguins["mean"]["interval_coverage_90"] <= 1.0
    assert "split-conformal" in penguins["interval"]


def test_categories_unseen_values_and_a_small_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(0)
    lines = ["x,kind,y"]
    for _ in range(200):
        kind = rng.choice("abc")
        x = rng.uniform(0, 10)
        lines.append(f"{x:.2f},{kind},{10 * x + {'a': 0, 'b': 50, 'c': 100}[kind]:.1f}")
    lines.append("5.00,zzz,80.0")  # a category the training rows may not have
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    spec = DataSpec(task="table", path=str(path), target="y", eval_size=40)
    found = fit_reference(split_table(spec), spec, [0])
    assert found["features"] == {"x": "numeric", "kind": "categorical"}
    assert found["mean"]["mae"] < 5  # y spans 0-200
    assert found["train_rows"] == found["fitted_rows"] == 161
    # Past MAX_FIT_ROWS training rows, a seeded draw of them is fitted (and said so).
    monkeypatch.setattr(gbm, "MAX_FIT_ROWS", 100)
    drawn = fit_reference(split_table(spec), spec, [0])
    assert (drawn["train_rows"], drawn["fitted_rows"]) == (161, 100)
    assert drawn == fit_reference(split_table(spec), spec, [0])
    monkeypatch.undo()
    # 16 training rows: too few to carve a calibration split, so no interval.
    small = spec.model_copy(update={"train_size": 16})
    metrics = fit_reference(split_table(small), small, [0])["runs"][0]["metrics"]
    assert "interval_score_90" not in metrics and metrics["mae"] is not None


def study(data: DataSpec) -> tuple[StudySpec, StudyRow, dict[str, JobRow]]:
    base = JobSpec(name="p", model={"source": "random:tiny-digit"}, data=data)
    spec = StudySpec(name="p", base=base, arms=[{"name": "emd"}], seeds=[0, 1])
    run = spec.run_spec("ce", base.loss.model_copy(update={"name": "ce"}), 0)
    job = JobRow(id="job-1", kind="job", status="succeeded", spec_json=run.model_dump(mode="json"))
    runs = [{"job_id": "job-1", "kind": "job", "arm": "ce", "seed": 0}]
    row = StudyRow(id="study-1", name="p", runs=runs, spec_json=spec.model_dump(mode="json"))
    return spec, row, {"job-1": job}


def test_a_table_study_result_carries_the_reference_outside_the_tests(tmp_path: Path) -> None:
    spec, row, jobs = study(PENGUINS)
    found = reference(spec, row, jobs)
    assert found is not None and found["note"] == NOTE
    assert [r["seed"] for r in found["runs"]] == [0, 1] and found["mean"]["mae"] > 0
    # Built into the stored result (the runs kept no answers here: nothing to compare).
    built = result.build(spec, row, jobs, str(tmp_path))
    assert built["reference"]["mean"] == found["mean"] and built["comparison"] is None
    # Before any run succeeded there is no split to read; other tasks have no reference.
    failed = {"job-1": JobRow(id="job-1", kind="job", status="failed", spec_json={})}
    assert "no run succeeded" in (reference(spec, row, failed) or {})["error"]
    spec_add, row_add, jobs_add = study(DataSpec(task="add"))
    assert reference(spec_add, row_add, jobs_add) is None


def test_numtune_study_show_prints_the_reference_beside_the_arms(
    penguins: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    arms = [{"arm": "ce", "mean": {"mae": 412.0}, "vs_ce": None, "verdict": "ce: baseline"}]
    study = {"id": "study-1", "status": "succeeded", "name": "p", "ended": 3, "runs": [{}] * 3,
             "result": {"comparison": {"primary": "mae", "arms": arms},
                        "reference": {"note": NOTE, **penguins}}}  # fmt: skip
    cli_render(study)
    shown = capsys.readouterr().out
    mae = f"{penguins['mean']['mae']:.3f}"
    assert f"reference (gradient boosting, not an LM, outside the tests): mean mae {mae}" in shown
    assert "over 3 seeds; split-conformal 90 % interval: coverage 0." in shown
    study["result"]["reference"] = {"note": NOTE, "error": "no run succeeded"}
    cli_render(study)
    assert "reference (gradient boosting): none (no run succeeded)" in capsys.readouterr().out
