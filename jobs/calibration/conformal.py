"""Interval calibration and point-estimate metrics for numeric answers (no model, no torch).

An observation is one held-out question answered through the serving path: the true
answer y, the numbers of the three one-pass decodings (greedy, `expected`, `median`) and
the K numbers parsed from K sampled completions. From the samples come the sample mean and
median and, at a nominal mass m, the served interval [lo, hi] (jobs/decoding.sample_summary:
the (1 − m)/2 and (1 + m)/2 sample quantiles).

Conformalised quantiles (split conformal) over nested intervals: I_t is the samples' central
interval of mass t for t in (0, 1) (I_1: their range), and the range widened by t − 1 on
each side past t = 1. A question scores s = the smallest t with y in I_t (0 when y is the
sample median, +inf when no sample parsed). With n scores, level m's nested parameter is
t_m = the ⌈(n + 1)·m⌉-th smallest score, and the served interval I_{t_m} covers a new
answer with probability ≥ m on exchangeable data. Scores vary continuously with where y
falls among the samples, so integer answers do not pile them onto one value the way a
residual does (an additive margin on [lo, hi] scores 0 whenever all K samples equal y,
and then over-covers). ⌈(n + 1)·m⌉ > n gives no finite t_m: that level stays
uncalibrated. Serving asks the predictor for the interval of mass min(t_m, 1) and widens
it by max(t_m − 1, 0): `mass_and_margin`.

The coverage a record reports is measured out of sample, by cross-conformal: the n
questions fall into `folds` groups (a seeded shuffle), each question's interval is I_t with
t fitted on the other groups only, and coverage, widths and Winkler scores are taken over
those intervals. t_m itself, the one served, is fitted on all n. A level whose t cannot be
fitted on every fold's complement is left uncalibrated: nothing is served unmeasured.

Clock answers are minutes on a 1440-minute circle: y and the samples are unwrapped to within
half a period of the samples' circular mean before scoring, and a widened interval is
wrapped back (lo > hi: it spans midnight; (0, period) is the whole day).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from jobs.calibration.intervals import Interval, distance, interval_report
from jobs.calibration.record import (
    ESTIMATORS,
    FOLDS,
    LEVELS,
    Calibration,
    EstimatorReport,
    LevelReport,
    Observation,
    mass_and_margin,
)
from jobs.infer.decoding import sample_median, sample_summary, unwrap

__all__ = ["ESTIMATORS", "LEVELS", "Calibration", "Observation", "calibrate", "mass_and_margin"]


# ---- the interval, its score and its nested parameter t -------------------------------------


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


def fold_ids(n: int, folds: int, seed: int = 0) -> list[int]:
    """The cross-conformal group of each of n questions: a seeded shuffle dealt round-robin
    into min(folds, n) groups whose sizes differ by at most one."""
    k = max(min(folds, n), 1)
    return [int(p) % k for p in np.random.default_rng(seed).permutation(n)]


def out_of_sample_t(scores: Sequence[float], level: float, groups: Sequence[int]) -> list[float]:
    """Per question, t fitted on the questions of the other groups; [] when some group's
    complement fits none (too few questions, or its rank falls on an unparsed one)."""
    fitted: dict[int, float] = {}
    for g in set(groups):
        rest = [s for s, h in zip(scores, groups, strict=True) if h != g]
        t = conformal_quantile(rest, level)
        if t is None:
            return []
        fitted[g] = t
    return [fitted[g] for g in groups]


def level_report(
    observations: Sequence[Observation], level: float, period: float | None, groups: Sequence[int]
) -> LevelReport:
    """The sampled interval at nominal `level`, its nested parameter t (on all questions),
    and I_t measured out of sample over `groups` (fold_ids)."""
    answers = [o.answer for o in observations]
    sampled = [interval_at(o.samples, level, period) for o in observations]
    report = LevelReport(
        level=level, sampled=interval_report(sampled, answers, level, period),
        nested_parameter=None, calibrated=None,
    )  # fmt: skip
    scores = [score(o.samples, o.answer, period) for o in observations]
    t = conformal_quantile(scores, level)
    held = out_of_sample_t(scores, level, groups) if t is not None else []
    if t is None or not held:  # nothing is served that was not measured out of sample
        return report
    outside = [interval_at(o.samples, s, period) for o, s in zip(observations, held, strict=True)]
    inside = [interval_at(o.samples, t, period) for o in observations]
    return report.model_copy(update={
        "nested_parameter": t,
        "calibrated": interval_report(outside, answers, level, period),
        "in_sample_coverage": interval_report(inside, answers, level, period).coverage,
    })  # fmt: skip


def calibrate(
    observations: Sequence[Observation],
    *,
    samples: int,
    temperature: float,
    period: float | None,
    source: str,
    levels: Sequence[float] = LEVELS,
    folds: int = FOLDS,
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
    groups = fold_ids(len(observations), folds)
    k = len(set(groups))
    return Calibration(
        n=len(observations),
        samples=samples,
        temperature=temperature,
        period=period,
        source=source,
        method=f"cross-conformal, {k} folds",
        folds=k,
        levels=[level_report(observations, m, period, groups) for m in levels],
        estimators=reports,
        best=best_of(reports) or "greedy",
    )
