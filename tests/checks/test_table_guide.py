"""docs/guides/table.md's generated section: bench/table_guide.py renders a table study's
JSON (arms with their tests, the reference beside them, the intervals) between the page's
markers and leaves the prose alone."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from bench import table_guide

ROOT = Path(__file__).resolve().parents[2]


def arm(name: str, mae: float, test: dict[str, Any] | None, verdict: str) -> dict[str, Any]:
    runs = [{"seed": s, "run_id": None, "metrics": {"mae": mae}} for s in (0, 1, 2)]
    tests = [] if test is None else [{"metric": "mae", **test}]
    return {
        "arm": name,
        "runs": runs,
        "mean": {"mae": mae},
        "vs_ce": test,
        "primary_tests": tests,
        "verdict": verdict,
    }


STUDY = {
    "name": "table-penguins",
    "status": "succeeded",
    "spec": {
        "seeds": [0, 1, 2],
        "base": {
            "model": {"source": "random:tiny-char"},
            "data": {"task": "table", "path": "bundled:penguins", "target": "body_mass_g"},
        },
    },
    "result": {
        "comparison": {
            "primary": "mae",
            "primaries": ["mae"],
            "arms": [
                arm("ce", 412.0, None, "baseline"),
                arm(
                    "emd",
                    380.5,
                    {"diff": -31.5, "ci": {"low": -60.0, "high": -3.0}, "p_holm": 0.041},
                    "better than ce",
                ),
            ],
        },
        "intervals": {
            "ce": {"coverage": 0.88, "relative_width_median": 0.3, "winkler_mean": 1900.0}
        },
        "reference": {
            "model": "scikit-learn HistGradientBoostingRegressor",
            "point": "loss absolute_error",
            "interval": "split-conformal 90%",
            "runs": [{"seed": s, "metrics": {}} for s in (0, 1, 2)],
            "mean": {
                "mae": 276.5,
                "interval_coverage_90": 0.885,
                "interval_width_90": 0.237,
                "interval_score_90": 1414.9,
            },
        },
    },
}


def test_the_study_renders_arms_tests_reference_and_intervals() -> None:
    text = table_guide.render(STUDY)
    assert "target `body_mass_g` of `bundled:penguins`" in text
    assert "| `ce` | 3 | 412 | — | — | baseline |" in text
    assert "| `emd` | 3 | 380 | -31.5 [-60, -3] | 0.041 | better than ce |" in text
    assert "| gradient boosting (reference) | 3 | 276 | — | — | not tested" in text
    assert "| `ce` | 0.88 | 0.3 | 1,900 |" in text
    assert "| gradient boosting (split-conformal) | 0.885 | 0.237 | 1,415 |" in text


def test_each_arms_decoding_and_the_power_statement_are_shown() -> None:
    study: dict[str, Any] = copy.deepcopy(STUDY)
    result: dict[str, Any] = study["result"]
    for shown, decoding in zip(result["comparison"]["arms"], ("median", "greedy"), strict=True):
        shown["decoding"] = decoding
    result["power"] = {
        "statement": "With 3 seeds × 64 questions the smallest mae difference detected is ±90.",
        "arms": [{"arm": "emd", "rules_out": "rules out a gain larger than 60"}],
    }
    text = table_guide.render(study)
    assert "| `ce` (median) | 3 | 412 |" in text and "| `emd` (greedy) | 3 | 380 |" in text
    assert "Power: With 3 seeds × 64 questions the smallest mae difference" in text
    assert "- `emd`: its 95 % CI rules out a gain larger than 60." in text


def test_the_page_shows_the_kept_studys_json() -> None:
    """The page's generated section is bench/results/table-penguins-study.json rendered."""
    study = json.loads((ROOT / "bench/results/table-penguins-study.json").read_text())
    page = (ROOT / "docs/guides/table.md").read_text()
    assert table_guide.fill(page, study) == page
    assert study["status"] == "succeeded" and study["result"]["reference"]["mean"]


def test_only_the_generated_section_of_the_page_changes() -> None:
    page = (ROOT / "docs/guides/table.md").read_text()
    filled = table_guide.fill(page, STUDY)
    before, after = page.split(table_guide.BEGIN)[0], page.split(table_guide.END)[1]
    assert filled.startswith(before) and filled.endswith(table_guide.END + after)
    assert "Not generated yet" not in filled and "`emd`" in filled
    assert table_guide.fill(filled, STUDY) == filled  # rendering again changes nothing
