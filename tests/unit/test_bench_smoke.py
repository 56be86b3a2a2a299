"""The benchmarks' own code paths, at a tiny size, so they cannot rot."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("row", ["torch_ce", "ours_ce", "ours_smmd", "plain_emd", "ntloss_was"])
def test_loss_speed_rows_run_at_a_tiny_size(row: str) -> None:
    bench = load("loss_speed")
    out = bench.child(row, positions=8, fraction=0.5, reps=1)
    assert out["row"] == row and out["seconds"] > 0 and out["peak_mb"] >= 0


def test_loss_speed_summary_ratios() -> None:
    bench = load("loss_speed")
    results = [
        {"row": "torch_ce", "fraction": 0.1, "seconds": 2.0, "peak_mb": 100.0},
        {"row": "ours_ce", "fraction": 0.1, "seconds": 1.0, "peak_mb": 50.0},
        {"row": "ours_emd", "fraction": 0.1, "seconds": 1.1, "peak_mb": 51.0},
    ]
    bench.summarise(results)
    emd = results[2]
    assert emd["vs_torch_ce"] == pytest.approx(0.55)
    assert emd["vs_ours_ce"] == pytest.approx(1.1)
    assert emd["extra_mem_vs_ours_ce"] == pytest.approx(0.02)


def test_train_overhead_spec_is_valid() -> None:
    bench = load("train_overhead")
    spec = bench.make_spec("random:tiny-digit", steps=5, batch=4)
    assert spec.scaling.num_workers == 1 and spec.train.steps == 5


@pytest.mark.ray
def test_calibration_bench_runs_end_to_end_at_a_minimal_size(tmp_path: Path) -> None:
    """bench/calibration.py: train 4 steps (Ray Train's local mode on a Ray it starts and
    stops), calibrate on 6 questions, measure on 6 others, write JSON, markdown, diagram."""
    bench = load("calibration")
    work, results = str(tmp_path / "runs"), str(tmp_path / "out")
    out = bench.main(["--losses", "ce", "--steps", "4", "--n", "6", "--samples", "2",
                      "--work", work, "--out", results])  # fmt: skip
    [result] = out["results"]
    assert result["n_calibration"] == 6 and result["n_test"] == 6
    assert [row["level"] for row in result["intervals"]] == list(bench.DIAGRAM_LEVELS)
    assert set(result["estimators_test"]) == {"greedy", "mean", "median", "expected",
                                              "median_decoding"}  # fmt: skip
    assert "| ce | 0.90 | 6 |" in (tmp_path / "out" / "calibration.md").read_text()
    assert (tmp_path / "out" / "calibration.png").stat().st_size > 10_000
    cal, test = bench.splits(bench.make_spec("ce", 4), 6)
    assert not {e.prompt for e in cal} & {e.prompt for e in test}
