"""How good a set of intervals is on known answers: coverage with its Wilson interval,
width (absolute and relative to the answer) and the interval (Winkler) score.

Clock answers are minutes on a circle of `period` minutes: an interval with lo > hi spans
midnight, distances go the shorter way round, and widths are relative to the period. The
per-question figures (distance, width, the interval score) are jobs/infer/scores.py's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jobs.calibration.record import IntervalReport, wilson
from jobs.infer.scores import Interval, contains, distance, interval_score, width

__all__ = ["Interval", "contains", "distance", "interval_report", "width", "winkler"]


def winkler(interval: Interval, y: float, level: float, period: float | None) -> float:
    """Interval score at nominal mass `level` (jobs/infer/scores.py: α = 1 − level)."""
    return interval_score(interval, y, 1.0 - level, period)


def interval_report(
    intervals: Sequence[Interval | None],
    answers: Sequence[float],
    level: float,
    period: float | None,
) -> IntervalReport:
    """Coverage over every question (no interval: a miss); widths and Winkler scores over
    the questions that have an interval."""
    n = len(answers)
    hits = sum(contains(i, y, period) for i, y in zip(intervals, answers, strict=True))
    low, high = wilson(hits, n)
    pairs = [(i, y) for i, y in zip(intervals, answers, strict=True) if i is not None]
    widths = np.asarray([width(i, period) for i, _ in pairs], dtype=np.float64)  # [m]
    scale = np.asarray([period or max(abs(y), 1.0) for _, y in pairs], dtype=np.float64)
    scores = [winkler(i, y, level, period) for i, y in pairs]
    some = len(pairs) > 0
    return IntervalReport(
        n=n, coverage=hits / n if n else 0.0, coverage_low=low, coverage_high=high,
        with_interval=len(pairs),
        width_mean=float(widths.mean()) if some else None,
        relative_width_mean=float((widths / scale).mean()) if some else None,
        relative_width_median=float(np.median(widths / scale)) if some else None,
        winkler_mean=float(np.mean(scores)) if some else None,
    )  # fmt: skip
