"""The README shows the committed accuracy study itself, and the study answers its question.

The committed JSON must hold cells where `ce` learns but has room to move (mean exact
match between 0.2 and 0.9), every loss over at least 5 seeds in each, Holm-corrected
p-values and confidence intervals, and the multi-digit rows parseable at the defaults.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
LOSSES = {"ce", "emd", "ntil", "mmd", "smmd", "ntl_mse", "smmd_tuned"}


def study() -> dict[str, Any]:
    return json.loads((RESULTS / "accuracy-small.json").read_text())


def test_readme_includes_the_committed_accuracy_tables() -> None:
    table = (RESULTS / "accuracy-small.md").read_text()
    body = re.sub(r"^## ", "#### ", table.split("\n", 2)[2], flags=re.M)
    assert body.strip() in (ROOT / "README.md").read_text()
    for png in ("accuracy-small.png", "accuracy-small-curves.png", "accuracy-small-lambda.png"):
        assert (RESULTS / png).stat().st_size > 10_000


def test_at_least_three_learnable_cells_with_every_loss_and_five_seeds() -> None:
    rows = [r for r in study()["summary"] if r["split"] == "interpolate"]
    learnable = {
        (r["model"], r["task"])
        for r in rows
        if r["loss"] == "ce" and 0.2 <= r["exact_match"]["mean"] <= 0.9
    }
    complete = {
        cell
        for cell in learnable
        if {r["loss"] for r in rows if (r["model"], r["task"]) == cell and len(r["seeds"]) >= 5}
        >= LOSSES
    }
    assert len(complete) >= 3, f"learnable cells with every loss x 5 seeds: {sorted(complete)}"
    for row in rows:
        if (row["model"], row["task"]) in complete and row["loss"] != "ce":
            test = row["vs_ce"]["exact_match"]
            assert {"p", "p_holm", "ci_low", "ci_high", "d_z"} <= set(test)


def test_multi_digit_rows_stay_parseable_at_the_defaults() -> None:
    rows = [r for r in study()["summary"] if r["model"] == "char3" and r["split"] == "interpolate"]
    defaults = [r for r in rows if "[" not in r["loss"]]
    assert {r["loss"] for r in defaults} >= LOSSES
    for row in defaults:
        assert row["parse_failure_rate"]["mean"] <= 0.05, row["loss"]
    assert any("distance=absolute" in r["loss"] for r in rows)  # the "before" rows are shown


def test_real_llama3_tokenizer_rows_stay_parseable_at_the_defaults() -> None:
    """The real 128k LLaMA-3 tokenizer, every loss at its defaults (number-first greedy
    decoding included); the same weights decoded with plain greedy are the "before" rows."""
    rows = [r for r in study()["summary"] if r["model"] == "llama3"]
    defaults = [r for r in rows if r["split"] == "interpolate" and "[" not in r["loss"]]
    assert {r["loss"] for r in defaults} >= LOSSES - {"smmd_tuned"}
    for row in defaults:
        assert row["parse_failure_rate"]["mean"] <= 0.05, row["loss"]
    assert any(r["split"] == "interpolate@greedy" for r in rows)
