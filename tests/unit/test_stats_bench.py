"""bench/accuracy_stats.py (now jobs.stats underneath) against hand-worked values, printed
t tables, and every test of the saved accuracy study as the closed-form code computed it."""

from __future__ import annotations

import importlib.util
import json
import math
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "accuracy_stats_3ad21bc.json"


@pytest.fixture(scope="module")
def stats() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "accuracy_stats", ROOT / "bench" / "accuracy_stats.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("df", "critical"),
    # Two-sided 5 % critical values from printed t tables.
    [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (9, 2.262)],
)
def test_interval_uses_the_t_quantile(stats: ModuleType, df: int, critical: float) -> None:
    diffs = [float(i * i % 7) for i in range(df + 1)]
    out = stats.paired_t_test(diffs, [0.0] * len(diffs))
    mean = sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / df)
    assert (out["ci_high"] - out["mean_diff"]) / (sd / math.sqrt(df + 1)) == pytest.approx(
        critical, abs=1e-3
    )


def test_paired_t_test_by_hand(stats: ModuleType) -> None:
    # Differences 1, 2, 3: mean 2, sd 1, t = 2·√3; for df = 2, p = 1 - t / √(t² + 2).
    out = stats.paired_t_test([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    t = 2 * math.sqrt(3)
    assert out["t"] == pytest.approx(t)
    assert out["p"] == pytest.approx(1 - t / math.sqrt(t * t + 2))
    assert out["d_z"] == pytest.approx(2.0)
    # No spread in the differences, or one pair: no test, never a made-up p.
    assert math.isnan(stats.paired_t_test([1.0, 2.0], [0.0, 1.0])["p"])
    assert math.isnan(stats.paired_t_test([1.0, math.nan], [0.0, 1.0])["p"])
    assert stats.paired_t_test([1.0, math.nan], [0.0, 1.0])["n"] == 1.0
    with pytest.raises(ValueError, match="length"):
        stats.paired_t_test([1.0], [1.0, 2.0])


def test_holm_keeps_nan(stats: ModuleType) -> None:
    # p = 0.01, 0.04, 0.03 (m = 3): sorted 0.01·3 = 0.03, 0.03·2 = 0.06, max(0.06, 0.04) = 0.06.
    assert stats.holm([0.01, 0.04, 0.03, math.nan]) == pytest.approx(
        [0.03, 0.06, 0.06, math.nan], nan_ok=True
    )


def _paired_inputs() -> dict[tuple[str, str, str, str], dict[int, dict[str, Any]]]:
    """(model, task, split, loss) → seed → that run's metrics, from the saved study."""
    saved = json.loads((ROOT / "bench" / "results" / "accuracy-small.json").read_text())
    out: dict[tuple[str, str, str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
    for run in saved["runs"]:
        for split, scores in run["metrics"].items():
            out[(run["model"], run["task"], split, run["loss"])][run["seed"]] = scores
    return out


def test_every_saved_test_is_unchanged(stats: ModuleType) -> None:
    """The 987 paired tests of bench/results/accuracy-small.json, recomputed, equal what the
    closed-form Student-t code of commit 3ad21bc computed (stored in the fixture)."""
    fixture = json.loads(FIXTURE.read_text())
    rows = [dict(zip(fixture["columns"], row, strict=True)) for row in fixture["rows"]]
    runs = _paired_inputs()
    assert len(rows) == 987

    def num(value: Any) -> float:
        return math.nan if value is None else float(value)

    for row in rows:
        model, task, split = row["cell"]
        arm, base = runs[(model, task, split, row["loss"])], runs[(model, task, split, "ce")]
        seeds = [s for s in sorted(arm) if s in base]
        out = stats.paired_t_test(
            [num(arm[s].get(row["metric"])) for s in seeds],
            [num(base[s].get(row["metric"])) for s in seeds],
        )
        for key in ("n", "mean_diff", "ci_low", "ci_high", "d_z", "t", "p"):
            assert out[key] == pytest.approx(num(row[key]), rel=1e-9, abs=1e-12, nan_ok=True), (
                row,
                key,
            )
    # Holm per (cell, λ family, metric), as the report then grouped them.
    families: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        families[(*row["cell"], row["lambda_family"], row["metric"])].append(row)
    for family in families.values():
        adjusted = stats.holm([num(r["p"]) for r in family])
        assert adjusted == pytest.approx([num(r["p_holm"]) for r in family], nan_ok=True)
