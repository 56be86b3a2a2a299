"""The metrics a study may declare primary, and which way each is better.

Each is a job's `eval_<metric>` (jobs/infer/evaluate.py computes it from the per-question
answers), so a study compares runs on a figure every run already recorded.
"""

from __future__ import annotations

from typing import Literal

PrimaryMetric = Literal["exact_match", "mae", "within_5pct", "median_rel_error"]
HIGHER_IS_BETTER: dict[str, bool] = {
    "exact_match": True,
    "within_5pct": True,
    "mae": False,
    "median_rel_error": False,
}
