"""The metrics a study may declare primary, and which way each is better.

Each is a run's figure, the mean (or for median_rel_error the median) of a per-question score
(jobs/infer/scores.py and evaluate.py): exact_match, mae, within_5pct, median_rel_error and
log_error from its final evaluation (`eval_<metric>`); interval_score_90 (the calibrated 90 %
interval's Winkler score) and crps (of its K samples) from its end-of-job calibration, on the
questions that calibrated. So a study compares runs on figures every run already recorded, and
its bootstrap resamples the same per-question scores.
"""

from __future__ import annotations

from typing import Literal, get_args

PrimaryMetric = Literal[
    "exact_match",
    "mae",
    "within_5pct",
    "median_rel_error",
    "log_error",
    "interval_score_90",
    "crps",
]
PRIMARY_METRICS: tuple[str, ...] = get_args(PrimaryMetric)
HIGHER_IS_BETTER: dict[str, bool] = {
    "exact_match": True,
    "within_5pct": True,
    "mae": False,
    "median_rel_error": False,
    "log_error": False,
    "interval_score_90": False,
    "crps": False,
}
# What a study may name as a secondary or exploratory test: the primaries and the other
# figures a run reports (the calibrated interval's width; how often no number came back).
TestedMetric = Literal[
    "exact_match",
    "mae",
    "within_5pct",
    "median_rel_error",
    "log_error",
    "interval_score_90",
    "crps",
    "within_1pct",
    "digit_accuracy",
    "parse_failure_rate",
    "interval_width_90",
]
# The registered secondary family when a study names none: closeness, then the calibrated
# interval (tested only where the runs measured it); the primaries are left out of it.
SECONDARY_DEFAULT: tuple[str, ...] = (
    "mae",
    "within_5pct",
    "median_rel_error",
    "log_error",
    "interval_width_90",
    "interval_score_90",
    "crps",
)
