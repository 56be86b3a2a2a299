"""Per-question closeness and calibration scores: one definition each, used by a job's
evaluation, its end-of-job calibration, the service's studies and the bench alike.

log_error: log10(1 + |error|), the error's order of magnitude (a miss by 9 scores 1, by
99 scores 2), so a few wild answers do not swamp the mean the way they swamp MAE.

interval_score (Winkler): for an interval [lower, upper] meant to hold mass 1 − α,
(upper − lower) + (2/α)·(lower − y)·[y < lower] + (2/α)·(y − upper)·[y > upper]: its width
plus a penalty for an answer outside it, in answer units; lower is better. At α = 0.1 it
scores the calibrated 90 % interval (`interval_score_90`).

crps: the continuous ranked probability score of the K sampled numbers as a predictive
distribution, E|X − y| − ½·E|X − X'| with X, X' drawn from the samples (the empirical
distribution, every pair counted, X = X' included); in answer units, lower is better, and
for K = 1 it is the absolute error.

Clock answers are minutes on a circle of `period` minutes: an interval with lower > upper
spans midnight and every distance goes the shorter way round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Interval = tuple[float, float]
ALPHA_90 = 0.1  # the calibrated 90 % interval's α


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


def interval_score(interval: Interval, y: float, alpha: float, period: float | None) -> float:
    """Winkler's interval score of an interval of nominal mass 1 − alpha (module docstring)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return width(interval, period) + 2.0 / alpha * miss(interval, y, period)


def log_error(abs_error: float | None) -> float | None:
    """log10(1 + |error|); None for an answer with no error (unparsed, or text)."""
    return None if abs_error is None else math.log10(1.0 + abs(abs_error))


def crps(samples: Sequence[float], y: float, period: float | None = None) -> float | None:
    """The samples' CRPS at the answer y (module docstring); None without samples.

    On a line, E|X − X'| over all K² ordered pairs of sorted samples x_(1) ≤ … ≤ x_(K) is
    (2/K²)·Σ_i (2i − K − 1)·x_(i) (i from 1): O(K log K), no K × K matrix. On a circle
    the pairwise distances are not a sum over sorted values, so the K × K matrix is
    formed (K is small: the samples a calibration draws)."""
    if len(samples) == 0:
        return None
    xs = np.asarray(samples, dtype=np.float64)  # [K]
    k = xs.size
    if period is None:
        to_answer = float(np.abs(xs - y).mean())
        ranked = np.sort(xs)
        weights = 2.0 * np.arange(1, k + 1) - k - 1  # [K]
        spread = float(2.0 * (weights * ranked).sum() / (k * k))
        return to_answer - 0.5 * spread
    gap = np.abs(xs - y) % period
    to_answer = float(np.minimum(gap, period - gap).mean())
    pairs = np.abs(xs[:, None] - xs[None, :]) % period  # [K, K]
    spread = float(np.minimum(pairs, period - pairs).mean())
    return to_answer - 0.5 * spread


def mean_defined(values: Sequence[float | None]) -> float | None:
    """The mean of the values that are defined; None when none is (a run-level figure from
    per-question ones, over the questions that have it)."""
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return sum(kept) / len(kept) if kept else None
