"""Issue 29's "Must show", over REST on `numtune up`: a study of random:tiny-char on an
uploaded JSONL (2 arms + ce × 2 seeds, a few steps each) runs as ordinary jobs through the
queue and completes; its result carries per-arm differences, CIs, p and Holm-adjusted p,
the equivalence outcome, the verdicts, every run's provenance and per-question predictions;
another owner cannot see it; cancelling a study cancels its queued jobs.

The study is posted once for the suite (`shared_study`): the dashboard's browser test may
have followed it already."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench import accuracy_report, readme_pretrained
from tests.e2e.conftest import Numtune
from tests.e2e.studies import (
    ARMS,
    SEEDS,
    STUDY_TIMEOUT_S,
    SharedStudy,
    study_spec,
    wait_for_study,
)

pytestmark = [pytest.mark.ray, pytest.mark.slow]
BENCH = Path(__file__).resolve().parents[2] / "bench"
RUNS = len(ARMS) * len(SEEDS)


def test_a_study_compares_arms_with_paired_statistics(
    shared_numtune: Numtune, shared_study: SharedStudy
) -> None:
    study = shared_study.created
    assert len(study["runs"]) == RUNS and {x["kind"] for x in study["runs"]} == {"job"}
    # A second study, cancelled at once: its queued jobs were cancelled with it.
    cancelled = shared_study.dropped
    assert cancelled.status_code == 202, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    assert len(shared_study.dropped_jobs) == 6
    for job in shared_study.dropped_jobs:
        assert job["status"] == "cancelled", job

    with shared_numtune.http() as http:
        # Another owner sees neither study.
        token = http.post("/v1/tokens", json={"owner": "bob", "scopes": ["submit"]}).json()["token"]
        bob = {"Authorization": f"Bearer {token}"}
        assert http.get(f"/v1/studies/{study['id']}", headers=bob).status_code == 404
        assert http.get("/v1/studies", headers=bob).json()["items"] == []

        done = wait_for_study(http, study["id"], STUDY_TIMEOUT_S)
        assert done["status"] == "succeeded", done
        failed = [http.get(f"/v1/jobs/{x['job_id']}").json() for x in done["runs"]
                  if x["status"] != "succeeded"]  # fmt: skip
        assert not failed and done["ended"] == RUNS, [(j["reason"], j["detail"]) for j in failed]
        result = done["result"]
        comparison = result["comparison"]
        assert comparison["baseline"] == "ce" and comparison["primary"] == "exact_match"
        assert [a["arm"] for a in comparison["arms"]] == ARMS
        for arm in comparison["arms"][1:]:
            test_ = arm["vs_ce"]
            assert test_["n"] == len(SEEDS) and test_["seeds"] == SEEDS
            for key in ("diff", "ci", "p", "p_holm", "equivalent", "wins", "p_boot"):
                assert key in test_, (key, test_)
            assert arm["verdict"].startswith(arm["arm"]) or arm["arm"] in arm["verdict"]
            assert len(arm["runs"]) == len(SEEDS)
        # One chart of every arm's learning curve.
        svg = http.get(done["curves_url"])
        assert svg.headers["content-type"].startswith("image/svg+xml")
        for arm in ARMS:
            assert f'data-series="{arm}"' in svg.text
        # The CLI shows the same study.
        shown = shared_numtune.cli("study", "show", study["id"])
        assert shown.returncode == 0, shown.stderr
        assert "smmd" in shown.stdout and "p_Holm" in shown.stdout
        # Every run: its spec, provenance and per-question predictions.
        assert len(result["runs"]) == RUNS
        for run in result["runs"]:
            assert run["status"] == "succeeded" and run["spec"]["train"]["seed"] == run["seed"]
            assert run["provenance"], run
            assert len(run["predictions"]) == 6, run


def same(a: float | None, b: float | None) -> bool:
    """Equal to 1e-12, with the bench's NaN standing for the service's None (no test)."""
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or math.isnan(b)
    return b is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def test_the_bench_keeps_the_studys_runs_as_its_own(
    shared_numtune: Numtune, shared_study: SharedStudy, tmp_path: Path
) -> None:
    """Issue 29's one code path: `bench/study_records.py` keeps the service study's runs as
    the bench's records, and the bench's table from them (accuracy_report.summarise's code)
    gives the service's own comparison, test for test."""
    with shared_numtune.http() as http:
        done = wait_for_study(http, shared_study.id, STUDY_TIMEOUT_S)
    assert done["status"] == "succeeded", done
    folder = tmp_path / "records"
    argv = [sys.executable, str(BENCH / "study_records.py"), "--study", done["id"]]
    kept = subprocess.run([*argv, "--records", str(folder)], env=shared_numtune.env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert kept.returncode == 0, kept.stderr
    assert f"kept {RUNS} runs and 0 sweeps of {done['id']}" in kept.stdout

    report, pretrained = accuracy_report, readme_pretrained
    runs, sweeps = pretrained.load_runs(folder)
    assert len(runs) == RUNS and sweeps == []
    by_job = {r["job_id"]: r for r in runs}
    for run in done["result"]["runs"]:  # each record: the run as the service has it
        record = by_job[run["job_id"]]
        key = (record["loss"], record["seed"], record["task"])
        assert key == (run["arm"], run["seed"], "jsonl")
        assert record["spec"] == run["spec"] and record["commit"] == run["provenance"]["git_commit"]
        assert record["predictions"]["interpolate"] == [q["prediction"] for q in run["predictions"]]
        assert record["metrics"]["interpolate"]["exact_match"] == run["metrics"]["exact_match"]
        assert [p["step"] for p in record["curve"]] == [2, 4] and record["step_time_s"] > 0

    rows = report.summarise_table(runs, rank=report.loss_rank, primary=report.primary_family,
                                  margin=done["spec"]["equivalence_margin"])  # fmt: skip
    table = {r["loss"]: r for r in rows}
    assert sorted(table) == sorted(ARMS)
    checked = 0  # figures the service computed (not None) that the bench matched
    for arm in done["result"]["comparison"]["arms"][1:]:
        for test in (arm["vs_ce"], *arm["secondary"]):
            mine = table[arm["arm"]]["vs_ce"][test["metric"]]
            ci = test["ci"] or {"low": None, "high": None}
            for ours, theirs in (("mean_diff", test["diff"]), ("p", test["p"]),
                                 ("ci_low", ci["low"]), ("ci_high", ci["high"]),
                                 ("p_boot", test["p_boot"])):  # fmt: skip
                assert same(mine[ours], theirs), (arm["arm"], test["metric"], ours)
                checked += theirs is not None
            assert (mine["wins"], mine["losses"]) == (test["wins"], test["losses"])
        primary = table[arm["arm"]]["vs_ce"]["exact_match"]
        assert same(primary["p_holm"], arm["vs_ce"]["p_holm"])  # the same Holm family
        assert primary["equivalent"] == arm["vs_ce"]["equivalent"]
    assert checked >= 10, checked


def test_the_study_posted_again_with_its_kept_work_trains_nothing_and_compares_the_same(
    shared_numtune: Numtune, shared_study: SharedStudy, tmp_path: Path
) -> None:
    """A study longer than its service (protocol 2's cell 2): its runs, kept to a folder by
    `bench/study_records.py --kept`, are taken over by the same spec posted again; it ends
    at once with the same comparison, naming the jobs that trained each run."""
    with shared_numtune.http() as http:
        done = wait_for_study(http, shared_study.id, STUDY_TIMEOUT_S)
    assert done["status"] == "succeeded", done
    script, pieces = str(BENCH / "study_records.py"), tmp_path / "kept"
    saved = subprocess.run([sys.executable, script, "--study", done["id"], "--records",
                            str(tmp_path / "a"), "--kept", str(pieces)], env=shared_numtune.env,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert saved.returncode == 0 and f"kept {RUNS} new pieces" in saved.stdout, saved.stderr
    spec = tmp_path / "study.json"  # the spec as its user wrote it (not as it was stored)
    data = done["spec"]["base"]["data"]
    spec.write_text(json.dumps(study_spec("units", data["file"], data["eval_file"], SEEDS)))
    again = subprocess.run([sys.executable, script, "--spec", str(spec), "--records",
                            str(tmp_path / "b"), "--kept", str(pieces)], env=shared_numtune.env,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert again.returncode == 0, again.stderr
    resumed_id = again.stdout.split(" of ")[-1].split()[0]
    assert "kept 0 runs and 0 sweeps" in again.stdout  # each was kept where it ran
    with shared_numtune.http() as http:
        resumed = http.get(f"/v1/studies/{resumed_id}").json()
    assert resumed["status"] == "succeeded" and resumed_id != done["id"]
    assert sorted(r["kept_from"] for r in resumed["runs"]) == sorted(
        r["job_id"] for r in done["runs"]
    )
    assert resumed["result"]["comparison"] == done["result"]["comparison"]
