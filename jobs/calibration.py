"""Interval calibration and point-estimate metrics for numeric answers (no model, no torch).

An observation is one held-out question answered through the serving path: the true
answer y, the numbers of the three one-pass decodings (greedy, `expected`, `median`) and
the K numbers parsed from K sampled completions. From the samples come the sample mean and
median and, at a nominal mass m, the served interval [lo, hi] (jobs/decoding.sample_summary:
the (1 − m)/2 and (1 + m)/2 sample quantiles).

Conformalised quantiles (split conformal): each calibration question scores
s = max(lo − y, y − hi) (negative inside the interval, +inf when no sample parsed); with
n scores the correction at level m is q = the ⌈(n + 1)·m⌉-th smallest score, and the
calibrated interval is [lo − q, hi + q] (q < 0 narrows it, never past its midpoint). On
exchangeable data it covers a new answer with probability ≥ m. ⌈(n + 1)·m⌉ > n gives no
finite q: that level stays uncalibrated.

Clock answers are minutes on a 1440-minute circle: y, lo and hi are unwrapped to within
half a period of the samples' circular mean before scoring, and a widened interval is
wrapped back (lo > hi: it spans midnight; (0, period) is the whole day).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from jobs.calibration_record import (
    ESTIMATORS,
    LEVELS,
    Calibration,
    EstimatorReport,
    LevelReport,
    Observation,
)
from jobs.decoding import sample_summary

__all__ = ["ESTIMATORS", "LEVELS", "Calibration", "Observation", "calibrate"]

Interval = tuple[float, float]


# ---- circle helpers ------------------------------------------------------------------------


def unwrap(x: float, centre: float, period: float) -> float:
    """x moved by whole periods to within half a period of `centre`."""
    return centre + (x - centre + period / 2.0) % period - period / 2.0


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


# ---- the interval, its score and its correction --------------------------------------------


def score(interval: Interval | None, centre: float | None, y: float, period: float | None) -> float:
    """Conformity score max(lo − y, y − hi); +inf without an interval. `centre` is the
    samples' circular mean (needed with a period only)."""
    if interval is None:
        return math.inf
    lo, hi = interval
    if period is not None:
        assert centre is not None, "a circular interval needs its centre"
        lo, hi, y = (unwrap(v, centre, period) for v in (lo, hi, y))
    return max(lo - y, y - hi)


def conformal_quantile(scores: Sequence[float], level: float) -> float | None:
    """The ⌈(n + 1)·level⌉-th smallest score; None when that rank exceeds n."""
    n = len(scores)
    rank = math.ceil((n + 1) * level - 1e-9)
    if n == 0 or rank > n:
        return None
    value = sorted(scores)[rank - 1]
    return None if math.isinf(value) else float(value)


def widen(
    interval: Interval | None, centre: float | None, q: float, period: float | None
) -> Interval | None:
    """[lo − q, hi + q], never narrower than its midpoint; wrapped back onto the circle."""
    if interval is None:
        return None
    lo, hi = interval
    if period is not None:
        assert centre is not None, "a circular interval needs its centre"
        lo, hi = unwrap(lo, centre, period), unwrap(hi, centre, period)
    mid = (lo + hi) / 2.0
    lo, hi = min(lo - q, mid), max(hi + q, mid)
    if period is None:
        return lo, hi
    if hi - lo >= period:
        return 0.0, period
    return lo % period, hi % period


# ---- estimates -----------------------------------------------------------------------------


def sample_median(values: Sequence[float], period: float | None) -> float | None:
    """Median of the samples (numpy's, the mean of the middle two for even K); on a circle,
    of the samples unwrapped around their circular mean, wrapped back."""
    if not values:
        return None
    arr = np.asarray(values, dtype=np.float64)
    if period is None:
        return float(np.median(arr))
    centre, _, _ = sample_summary(list(values), 0.5, period=period)
    if centre is None:  # evenly spread round the circle: no median either
        return None
    return float(np.median([unwrap(v, centre, period) for v in arr])) % period


def estimates(obs: Observation, period: float | None) -> dict[str, float | None]:
    mean, _, _ = sample_summary(obs.samples, 0.5, period=period)
    return {
        "greedy": obs.greedy,
        "mean": mean,
        "median": sample_median(obs.samples, period),
        "expected": obs.expected,
        "median_decoding": obs.median_decoding,
    }


def estimator_report(
    values: Sequence[float | None], answers: Sequence[float], period: float | None
) -> EstimatorReport:
    pairs = [(v, y) for v, y in zip(values, answers, strict=True) if v is not None]
    errors = [distance(v, y, period) for v, y in pairs]
    relative = [e / max(abs(y), 1.0) for e, (_, y) in zip(errors, pairs, strict=True)]
    n = len(answers)
    return EstimatorReport(
        mae=float(np.mean(errors)) if errors else None,
        median_rel_error=float(np.median(relative)) if relative else None,
        exact_match=sum(e < 1e-9 for e in errors) / n if n else 0.0,
        answered=len(pairs) / n if n else 0.0,
    )


def best_of(reports: dict[str, EstimatorReport]) -> str | None:
    """The lowest MAE among the estimators that answer most often (None: none answers): one
    that answers less often must not win by skipping the hard questions."""
    if not reports:
        return None
    most = max(r.answered for r in reports.values())
    scored = {n: r.mae for n, r in reports.items() if r.mae is not None and r.answered == most}
    return min(scored, key=lambda k: scored[k]) if scored else None


# ---- the whole record ----------------------------------------------------------------------


def level_report(
    observations: Sequence[Observation], level: float, period: float | None
) -> LevelReport:
    answers = [o.answer for o in observations]
    summaries = [sample_summary(o.samples, level, period=period) for o in observations]
    intervals = [s[2] for s in summaries]
    centres = [s[0] for s in summaries]
    n = len(observations)
    q = conformal_quantile(
        [score(i, c, y, period) for i, c, y in zip(intervals, centres, answers, strict=True)],
        level,
    )
    calibrated: list[Interval | None] = []
    if q is not None:
        calibrated = [widen(i, c, q, period) for i, c in zip(intervals, centres, strict=True)]
    return LevelReport(
        level=level,
        coverage=sum(contains(i, y, period) for i, y in zip(intervals, answers, strict=True)) / n,
        width=float(np.mean([width(i, period) for i in intervals])),
        correction=q,
        calibrated_coverage=(
            sum(contains(i, y, period) for i, y in zip(calibrated, answers, strict=True)) / n
            if q is not None
            else None
        ),
        calibrated_width=(
            float(np.mean([width(i, period) for i in calibrated])) if q is not None else None
        ),
    )


def calibrate(
    observations: Sequence[Observation],
    *,
    samples: int,
    temperature: float,
    period: float | None,
    source: str,
    levels: Sequence[float] = LEVELS,
) -> Calibration:
    """The record stored on a model version (raises ValueError for no observations)."""
    if not observations:
        raise ValueError("calibration needs at least one question")
    answers = [o.answer for o in observations]
    per_question = [estimates(o, period) for o in observations]
    reports = {
        name: estimator_report([e[name] for e in per_question], answers, period)
        for name in ESTIMATORS
    }
    return Calibration(
        n=len(observations),
        samples=samples,
        temperature=temperature,
        period=period,
        source=source,
        levels=[level_report(observations, m, period) for m in levels],
        estimators=reports,
        best=best_of(reports) or "greedy",
    )


def held_out_check(
    observations: Sequence[Observation], record: Calibration
) -> list[dict[str, float | None]]:
    """Per level of `record`: coverage and mean width on questions it was not calibrated on,
    before and after its correction (after: None where the level has no correction)."""
    n = len(observations)
    rows: list[dict[str, float | None]] = []
    for report in record.levels:
        before = level_report(observations, report.level, record.period)
        after_cov: float | None = None
        after_width: float | None = None
        if report.correction is not None:
            widened = []
            for o in observations:
                centre, _, interval = sample_summary(o.samples, report.level, period=record.period)
                widened.append(widen(interval, centre, report.correction, record.period))
            answers = [o.answer for o in observations]
            hits = [contains(i, y, record.period) for i, y in zip(widened, answers, strict=True)]
            after_cov = sum(hits) / n
            after_width = float(np.mean([width(i, record.period) for i in widened]))
        rows.append({
            "level": report.level, "n": float(n), "coverage_before": before.coverage,
            "width_before": before.width, "coverage_after": after_cov, "width_after": after_width,
        })  # fmt: skip
    return rows
