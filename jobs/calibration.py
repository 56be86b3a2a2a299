"""Interval calibration and point-estimate metrics for numeric answers (no model, no torch).

An observation is one held-out question answered through the serving path: the true
answer y, the numbers of the three one-pass decodings (greedy, `expected`, `median`) and
the K numbers parsed from K sampled completions. From the samples come the sample mean and
median and, at a nominal mass m, the served interval [lo, hi] (jobs/decoding.sample_summary:
the (1 − m)/2 and (1 + m)/2 sample quantiles).

Conformalised quantiles (split conformal) over nested intervals: I_t is the samples' central
interval of mass t for t in (0, 1) (I_1: their range), and the range widened by t − 1 on
each side past t = 1. A question scores s = the smallest t with y in I_t (0 when y is the
sample median, +inf when no sample parsed). With n scores, level m's calibrated mass is
t_m = the ⌈(n + 1)·m⌉-th smallest score, and the served interval I_{t_m} covers a new
answer with probability ≥ m on exchangeable data. Scores vary continuously with where y
falls among the samples, so integer answers do not pile them onto one value the way a
residual does (an additive margin on [lo, hi] scores 0 whenever all K samples equal y,
and then over-covers). ⌈(n + 1)·m⌉ > n gives no finite t_m: that level stays
uncalibrated. Serving asks the predictor for the interval of mass min(t_m, 1) and widens
it by max(t_m − 1, 0): `mass_and_margin`.

Clock answers are minutes on a 1440-minute circle: y and the samples are unwrapped to within
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


# ---- the interval, its score and its calibrated_mass --------------------------------------------


MIN_MASS = 1e-9  # the predictor takes masses in (0, 1]
HAIR = 1e-9  # added to t: an answer exactly at I_t's end, as scored, stays inside


def _probability_span(xs: np.ndarray, y: float) -> tuple[float, float]:
    """(inf{p: Q(p) ≥ y}, sup{p: Q(p) ≤ y}) for numpy's linear quantile function Q of the
    sorted samples xs [K] (Q(i / (K − 1)) = xs[i], linear in between)."""
    k = len(xs) - 1
    i = int(np.searchsorted(xs, y, side="left"))  # first xs[i] ≥ y
    j = int(np.searchsorted(xs, y, side="right")) - 1  # last xs[j] ≤ y
    if i > j:  # xs[j] < y < xs[i]: one point inside a linear piece
        p = (j + (y - xs[j]) / (xs[i] - xs[j])) / k
        return p, p
    return i / k, j / k  # y is a sample value (equal ones span i..j)


def score(samples: Sequence[float], y: float, period: float | None) -> float:
    """The smallest t with y in I_t (module docstring); +inf without samples."""
    if not samples:
        return math.inf
    xs = np.asarray(samples, dtype=np.float64)
    if period is not None:
        centre, _, _ = sample_summary(list(samples), 0.5, period=period)
        if centre is None:  # evenly round the circle: no interval is centred anywhere
            return math.inf
        xs = np.asarray([unwrap(v, centre, period) for v in xs])
        y = unwrap(y, centre, period)
    xs = np.sort(xs)
    if y < xs[0] or y > xs[-1]:
        return 1.0 + max(xs[0] - y, y - xs[-1])
    if len(xs) == 1:
        return 0.0
    p_min, p_max = _probability_span(xs, y)
    # y in [Q((1 − t)/2), Q((1 + t)/2)] ⟺ (1 − t)/2 ≤ p_max and (1 + t)/2 ≥ p_min.
    return max(0.0, 1.0 - 2.0 * p_max, 2.0 * p_min - 1.0)


def mass_and_margin(t: float) -> tuple[float, float]:
    """I_t as (mass of the sampled interval to ask for, margin to widen it by)."""
    t += HAIR
    return min(max(t, MIN_MASS), 1.0), max(t - 1.0, 0.0)


def interval_at(samples: Sequence[float], t: float, period: float | None) -> Interval | None:
    """I_t of these samples, computed as serving computes it (sample_summary, then widen)."""
    mass, margin = mass_and_margin(t)
    centre, _, interval = sample_summary(list(samples), mass, period=period)
    return widen(interval, centre, margin, period)


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
    """[lo − q, hi + q] (q ≥ 0 in use), never narrower than its midpoint; wrapped back onto
    the circle."""
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
    """Coverage and width of the nominal `level` interval, its calibrated mass and (on the
    same questions) the calibrated interval's coverage and width."""
    answers = [o.answer for o in observations]
    before = [interval_at(o.samples, level, period) for o in observations]
    t = conformal_quantile([score(o.samples, o.answer, period) for o in observations], level)
    after = [interval_at(o.samples, t, period) for o in observations] if t is not None else []
    return LevelReport(
        level=level,
        coverage=coverage(before, answers, period),
        width=mean_width(before, period),
        calibrated_mass=t,
        calibrated_coverage=coverage(after, answers, period) if t is not None else None,
        calibrated_width=mean_width(after, period) if t is not None else None,
    )


def coverage(
    intervals: Sequence[Interval | None], answers: Sequence[float], period: float | None
) -> float:
    hits = [contains(i, y, period) for i, y in zip(intervals, answers, strict=True)]
    return sum(hits) / len(hits)


def mean_width(intervals: Sequence[Interval | None], period: float | None) -> float:
    return float(np.mean([width(i, period) for i in intervals]))


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
    before and after calibration (after: None where the level has no calibrated mass)."""
    answers = [o.answer for o in observations]
    rows: list[dict[str, float | None]] = []
    for report in record.levels:
        before = [interval_at(o.samples, report.level, record.period) for o in observations]
        t = report.calibrated_mass
        done = t is not None
        after = [interval_at(o.samples, t, record.period) for o in observations if t is not None]
        rows.append({
            "level": report.level, "n": float(len(observations)),
            "coverage_before": coverage(before, answers, record.period),
            "width_before": mean_width(before, record.period),
            "coverage_after": coverage(after, answers, record.period) if done else None,
            "width_after": mean_width(after, record.period) if done else None,
        })  # fmt: skip
    return rows
