"""How good a set of intervals is on known answers: coverage with its Wilson interval,
width (absolute and relative to the answer) and the interval (Winkler) score.

Clock answers are minutes on a circle of `period` minutes: an interval with lo > hi spans
midnight, distances go the shorter way round, and widths are relative to the period.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jobs.calibration.record import IntervalReport, wilson

Interval = tuple[float, float]


def distance(a: float, b: float, period: float | None) -> float:
    """|a − b|, the shorter way round the circle when a period is given."""
    d = abs(a - b)
    return min(d % period, period - d % period) if period else d


def contains(interval: Interval | None, y: float, period: float | None) -> bool:
    if interval is None:
        return False
    lo, hi = interval
    if period is None or lo <= hi:
        return lo <= y <= hi
    return y >= lo or y <= hi  # wrapped: it spans midnight


def width(interval: Interval | None, period: float | None) -> float:
    if interval is None:
        return 0.0
    lo, hi = interval
    return hi - lo if period is None or lo <= hi else hi - lo + period


def miss(interval: Interval, y: float, period: float | None) -> float:
    """How far y lies outside the interval (0 inside): to its nearer end."""
    if contains(interval, y, period):
        return 0.0
    return min(distance(interval[0], y, period), distance(interval[1], y, period))


def winkler(interval: Interval, y: float, level: float, period: float | None) -> float:
    """Interval score at nominal mass `level`: width + 2 / (1 − level) × the miss."""
    return width(interval, period) + 2.0 / (1.0 - level) * miss(interval, y, period)


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
