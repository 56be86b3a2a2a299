"""Paired statistics for comparing fine-tuning arms against a baseline (scipy, numpy).

Imported by the control plane: no torch, nothing from the service.
"""

from jobs.stats.compare import SECONDARY, compare
from jobs.stats.models import (
    LOWER_IS_BETTER,
    ArmResult,
    Comparison,
    Footing,
    Interval,
    MetricTest,
    PrimaryTest,
    QuestionRecord,
    RunOutcome,
    RunSummary,
    SecondaryTest,
    higher_is_better,
)
from jobs.stats.paired import TTest, benjamini_hochberg, holm, paired_t, tost

__all__ = [
    "LOWER_IS_BETTER",
    "SECONDARY",
    "ArmResult",
    "Comparison",
    "Footing",
    "Interval",
    "MetricTest",
    "PrimaryTest",
    "QuestionRecord",
    "RunOutcome",
    "RunSummary",
    "SecondaryTest",
    "TTest",
    "benjamini_hochberg",
    "compare",
    "higher_is_better",
    "holm",
    "paired_t",
    "tost",
]
