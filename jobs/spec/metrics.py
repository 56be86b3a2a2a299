"""The metrics a study may declare primary, and which way each is better.

Each is a run's figure, the mean (or for median_rel_error the median) of a per-question score
(jobs/infer/scores.py and evaluate.py): exact_match, mae, within_5pct, median_rel_error and
log_error from its final evaluation (`eval_<metric>`); interval_score_90 (the calibrated 90 %
interval's Winkler score) and crps (of its K samples) from its end-of-job calibration, on the
questions that calibrated. So a study compares runs on figures every run already recorded, and
its bootstrap resamples the same per-question scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import AfterValidator, Field

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


def _distinct(metrics: list[str]) -> list[str]:
    if len(set(metrics)) != len(metrics):
        raise ValueError("each metric once")
    return metrics


# `primary_metric`: one name (as before) or a list; Holm runs over every primary × arm.
Primaries = Annotated[
    PrimaryMetric
    | Annotated[
        list[PrimaryMetric],
        Field(min_length=1, max_length=len(PRIMARY_METRICS)),
        AfterValidator(_distinct),
    ],
    Field(
        description="one metric or a list; Holm's correction runs over every primary metric "
        "× arm (and over their TOST p)"
    ),
]
# `secondary_metrics`: the registered secondary family (Benjamini–Hochberg); null: the default.
Secondaries = Annotated[
    Annotated[list[TestedMetric], Field(max_length=16), AfterValidator(_distinct)] | None,
    Field(
        description="the secondary family, fixed before any run (Benjamini–Hochberg over "
        f"it); null: {', '.join(SECONDARY_DEFAULT)} (those the runs measure). Every other "
        "figure the runs report is shown as exploratory: raw p, outside any correction"
    ),
]
# `equivalence_margin`: one margin for every primary, or one per primary (others: no TOST).
Margin = Annotated[
    Annotated[float, Field(gt=0)] | dict[PrimaryMetric, Annotated[float, Field(gt=0)]],
    Field(
        description="TOST's ±margin: one number for every primary metric, or per metric "
        "({mae: 2.0, exact_match: 0.02}); a primary without one gets no equivalence test"
    ),
]


def primaries_of(primary: str | Sequence[str]) -> list[str]:
    return [primary] if isinstance(primary, str) else list(primary)


def check_families(
    primaries: list[str], secondary: Sequence[str] | None, margin: float | Mapping[Any, float]
) -> None:
    """A metric sits in one family; a per-metric margin names primaries only."""
    if both := [m for m in secondary or () if m in primaries]:
        raise ValueError(f"secondary_metrics: {both} are primary metrics (one family each)")
    if isinstance(margin, Mapping) and (extra := sorted(set(margin) - set(primaries))):
        raise ValueError(f"equivalence_margin: {extra} are not primary metrics")


def secondaries_of(primaries: list[str], secondary: Sequence[str] | None) -> list[str]:
    chosen = SECONDARY_DEFAULT if secondary is None else secondary
    return [m for m in chosen if m not in primaries]


def margin_of(margin: float | Mapping[Any, float], metric: str) -> float | None:
    """The equivalence margin of one primary metric; None: it has no TOST."""
    return float(margin) if isinstance(margin, int | float) else margin.get(metric)


class MetricFamilies:
    """A study spec's metric families as lists (StudySpec mixes this in; its fields are
    `primary_metric`, `secondary_metrics` and `equivalence_margin`)."""

    if TYPE_CHECKING:
        primary_metric: str | Sequence[str]
        secondary_metrics: Sequence[str] | None
        equivalence_margin: float | Mapping[Any, float]

    @property
    def primaries(self) -> list[str]:
        return primaries_of(self.primary_metric)

    @property
    def primary(self) -> str:
        """The first primary metric (sweeps choose by it; curves show it)."""
        return self.primaries[0]

    @property
    def secondaries(self) -> list[str]:
        """The registered secondary family (the primaries left out)."""
        return secondaries_of(self.primaries, self.secondary_metrics)

    def margin_for(self, metric: str) -> float | None:
        return margin_of(self.equivalence_margin, metric)
