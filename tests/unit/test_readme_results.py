"""The README shows the committed accuracy table itself, not a stale copy of it."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_includes_the_committed_accuracy_table() -> None:
    table = (ROOT / "bench" / "results" / "accuracy-small.md").read_text()
    body = re.sub(r"^## ", "#### ", table.split("\n", 2)[2], flags=re.M)
    assert body.strip() in (ROOT / "README.md").read_text()
    # And the table is the one the committed JSON renders: every run of 7 losses x 3 seeds.
    result = json.loads((ROOT / "bench" / "results" / "accuracy-small.json").read_text())
    assert result["command"] == "python bench/accuracy.py --scale small"
    assert {r["seed"] for r in result["runs"]} == {0, 1, 2}
    assert len({r["loss"] for r in result["runs"]}) == 7
    assert (ROOT / "bench" / "results" / "accuracy-small.png").stat().st_size > 10_000
