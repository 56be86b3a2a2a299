"""bench/accuracy_stats.py (jobs.stats underneath) against every test of the saved accuracy
study as the closed-form Student-t code of commit 3ad21bc computed it."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from bench import accuracy_stats
from jobs.stats import holm

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "accuracy_stats_3ad21bc.json"


@pytest.fixture(scope="module")
def stats() -> ModuleType:
    return accuracy_stats


def test_every_saved_test_is_unchanged(stats: ModuleType) -> None:
    """The 987 paired tests of bench/results/accuracy-small.json, recomputed by the table's
    code, equal what the closed-form Student-t code computed (stored in the fixture)."""
    fixture = json.loads(FIXTURE.read_text())
    rows = [dict(zip(fixture["columns"], row, strict=True)) for row in fixture["rows"]]
    assert len(rows) == 987
    saved = json.loads((ROOT / "bench" / "results" / "accuracy-small.json").read_text())
    summary = stats.summarise_table(
        saved["runs"], rank=str, primary=lambda split, loss: False, margin=0.02
    )
    by_key = {(r["model"], r["task"], r["split"], r["loss"]): r for r in summary}

    def num(value: Any) -> float:
        return math.nan if value is None else float(value)

    for row in rows:
        test = by_key[(*row["cell"], row["loss"])]["vs_ce"][row["metric"]]
        for key in ("n", "mean_diff", "ci_low", "ci_high", "d_z", "t", "p"):
            assert test[key] == pytest.approx(num(row[key]), rel=1e-9, abs=1e-12, nan_ok=True), (
                row,
                key,
            )
    # Holm per (cell, λ family, metric), as the report then grouped them.
    families: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        families[(*row["cell"], row["lambda_family"], row["metric"])].append(row)
    for family in families.values():
        adjusted = holm([None if r["p"] is None else r["p"] for r in family])
        expected = [r["p_holm"] for r in family]
        assert adjusted == pytest.approx(expected)
