"""The benchmarks' own code paths, at a tiny size, so they cannot rot."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.support.bench import load


@pytest.mark.parametrize(
    "row",
    [
        "torch_ce",
        "ours_ce",
        "ours_smmd",
        "ours_del",
        "ours_ntl_number",
        "plain_emd",
        "ntloss_number",
    ],
)
def test_loss_speed_rows_run_at_a_tiny_size(row: str) -> None:
    bench = load("loss_speed")
    out = bench.child(row, positions=8, fraction=0.5, reps=1)
    # At 16 positions the peak is noise: the kernel updates the RSS high-water mark lazily,
    # so inside a busy pytest process it may even read below the current RSS.
    assert out["row"] == row and out["seconds"] > 0 and math.isfinite(out["peak_mb"])
    assert out["cpu_seconds"] > 0


def test_loss_speed_summary_ratios() -> None:
    bench = load("loss_speed")
    results = [
        {"row": "torch_ce", "fraction": 0.1, "seconds": 2.0, "cpu_seconds": 4.0, "peak_mb": 100.0},
        {"row": "ours_ce", "fraction": 0.1, "seconds": 1.0, "cpu_seconds": 2.0, "peak_mb": 50.0},
        {"row": "ours_emd", "fraction": 0.1, "seconds": 1.1, "cpu_seconds": 2.4, "peak_mb": 51.0},
    ]
    bench.summarise(results)
    emd = results[2]
    assert emd["vs_torch_ce"] == pytest.approx(0.55)
    assert emd["vs_ours_ce"] == pytest.approx(1.1)
    assert emd["cpu_vs_ours_ce"] == pytest.approx(1.2)
    assert emd["extra_mem_vs_ours_ce"] == pytest.approx(0.02)


def test_train_overhead_spec_is_valid() -> None:
    bench = load("train_overhead")
    spec = bench.make_spec("random:tiny-digit", steps=5, batch=4)
    assert spec.scaling.num_workers == 1 and spec.train.steps == 5


@pytest.mark.parametrize("row", ["fused_linear", "materialised", "torch_ce"])
def test_fused_linear_rows_run_at_a_tiny_size(row: str) -> None:
    bench = load("fused_linear")
    out = bench.child(row, positions=16, loss_name="smmd", reps=1, vocab=300, width=16)
    # At 16 positions the peak is noise: the kernel updates the RSS high-water mark lazily,
    # so inside a busy pytest process it may even read below the current RSS.
    assert out["row"] == row and out["seconds"] > 0 and math.isfinite(out["peak_mb"])


def test_fused_linear_extrapolates_and_summarises() -> None:
    bench = load("fused_linear")
    results = [
        {"row": "materialised", "positions": 2048, "seconds": 2.0, "peak_mb": 100.0},
        {"row": "materialised", "positions": 4096, "seconds": 4.0, "peak_mb": 200.0},
        {"row": "fused_linear", "positions": 16384, "seconds": 12.0, "peak_mb": 50.0},
    ]
    guess = bench.extrapolate(results, "materialised", 16384)
    assert guess == {
        "row": "materialised",
        "positions": 16384,
        "extrapolated": True,
        "seconds": None,  # time is measured or absent, never guessed
        "peak_mb": 800.0,
    }
    summary = bench.summarise([*results, guess], 16384)
    assert summary["time_vs_materialised"] is None
    assert bench.summarise(results, 4096) == {}  # no fused row there
    assert summary["memory_vs_materialised"] == pytest.approx(1 / 16)
    assert not bench.fits("materialised", 16384, 12.0) and bench.fits("fused_linear", 16384, 1)


@pytest.mark.ray
def test_calibration_bench_runs_end_to_end_at_a_minimal_size(tmp_path: Path) -> None:
    """bench/calibration.py: train 4 steps (Ray Train's local mode on a Ray it starts and
    stops), calibrate 12 held-out questions with a version's method (cross-conformal),
    write JSON, markdown, diagram."""
    bench = load("calibration")
    work, results = str(tmp_path / "runs"), str(tmp_path / "out")
    out = bench.main(["--losses", "ce", "--steps", "4", "--n", "12", "--samples", "2",
                      "--work", work, "--out", results])  # fmt: skip
    [result] = out["results"]
    record = result["record"]
    assert result["n"] == record["n"] == 12 and record["method"] == "cross-conformal, 5 folds"
    assert [row["level"] for row in record["levels"]] == list(bench.DIAGRAM_LEVELS)
    assert set(record["estimators"]) == {"greedy", "mean", "median", "expected",
                                         "median_decoding"}  # fmt: skip
    table = (tmp_path / "out" / "calibration.md").read_text()
    assert "| ce | 0.90 | 12 | sampled |" in table and "| ce | 0.90 | 12 | calibrated |" in table
    assert (tmp_path / "out" / "calibration.png").stat().st_size > 10_000
    spec = bench.make_spec("ce", 4)
    own = {e.prompt for e in bench.load_task(spec.data).eval}
    assert not own & {e.prompt for e in bench.held_out(spec, 12)}  # not the job's eval set


def test_queue_scale_runs_at_a_tiny_size(tmp_path: Path) -> None:
    bench = load("queue_scale")
    result = bench.run([40], running_share=0.5, owners=4)
    [run] = result["runs"]
    assert (run["jobs"], run["running"]) == (40, 20)
    first, *_, steady = run["passes"]
    # Each pass reads every active job once (admission reuses those rows when nothing
    # ended), whatever the jobs' logs hold; a steady pass writes nothing.
    assert steady["rows_read"] == 40
    assert steady["statements"] < first["statements"]
    assert run["submitted"] > 0
    assert run["plan_decisions"] == {"wait": 20 - run["submitted"]}  # the cluster is full
    bench.plot(result, tmp_path / "queue_scale.png")
    assert (tmp_path / "queue_scale.png").stat().st_size > 0
