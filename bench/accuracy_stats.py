"""Statistics for the accuracy table: mean ± std over seeds, a paired t-test against ce
with a 95 % confidence interval of the difference and its effect size, and Holm's
correction across the losses of a cell.

scipy is not a numtune dependency, so the Student-t tail is computed here. The degrees of
freedom of a paired test over n seeds are the integer n - 1, for which the two-sided tail
has an exact finite series (Abramowitz & Stegun 26.7.3 / 26.7.4): no numerical integration.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def student_t_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with an integer `df` >= 1 degrees of freedom.

    With θ = atan(|t| / √df), A(t|df) = P(|T| < |t|) is
      odd df:  (2/π) (θ + sinθ Σ_{k=0}^{(df-3)/2} c_k cos^{2k+1}θ),
               c_0 = 1, c_k = c_{k-1}·2k/(2k+1)
      even df: sinθ Σ_{k=0}^{(df-2)/2} e_k cos^{2k}θ,  e_0 = 1, e_k = e_{k-1}·(2k-1)/(2k)
    and the p-value is 1 - A.
    """
    if df < 1:
        raise ValueError(f"df must be a positive integer, got {df}")
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0
    theta = math.atan(abs(t) / math.sqrt(df))
    sin, cos = math.sin(theta), math.cos(theta)
    if df % 2 == 1:
        series, coef = 0.0, 1.0
        for k in range((df - 1) // 2):  # terms k = 0 .. (df-3)/2; none when df == 1
            if k > 0:
                coef *= 2 * k / (2 * k + 1)
            series += coef * cos ** (2 * k + 1)
        inside = 2 / math.pi * (theta + sin * series)
    else:
        series, coef = 0.0, 1.0
        for k in range(df // 2):  # terms k = 0 .. (df-2)/2
            if k > 0:
                coef *= (2 * k - 1) / (2 * k)
            series += coef * cos ** (2 * k)
        inside = sin * series
    return min(1.0, max(0.0, 1.0 - inside))


def student_t_quantile(q: float, df: int) -> float:
    """The t with P(|T| >= t) = q (two-sided), by bisection on the exact tail above."""
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    lo, hi = 0.0, 1.0
    while student_t_two_sided_p(hi, df) > q:
        hi *= 2
    for _ in range(100):  # the tail is monotone in t: halve the bracket to float precision
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if student_t_two_sided_p(mid, df) > q else (lo, mid)
    return (lo + hi) / 2


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Two-sided paired t-test of a against b (pairs with a non-finite side are dropped).

    Returns n, the mean difference a - b, its 95 % confidence interval (ci_low, ci_high),
    the effect size d_z (mean difference / sd of the differences), t and p. p, t, d_z and
    the interval are NaN when undefined: fewer than two pairs, or differences that are all
    identical (zero spread, so no test).
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    diffs = [x - y for x, y in zip(a, b, strict=True) if math.isfinite(x) and math.isfinite(y)]
    n = len(diffs)
    out = {"n": float(n), "mean_diff": statistics.fmean(diffs) if diffs else math.nan}
    undefined = dict.fromkeys(("ci_low", "ci_high", "d_z", "t", "p"), math.nan)
    if n < 2:
        return {**out, **undefined}
    sd = statistics.stdev(diffs)
    if sd == 0.0:
        return {**out, **undefined}
    se = sd / math.sqrt(n)
    half = student_t_quantile(0.05, n - 1) * se
    t = out["mean_diff"] / se
    return {
        **out,
        "ci_low": out["mean_diff"] - half,
        "ci_high": out["mean_diff"] + half,
        "d_z": out["mean_diff"] / sd,
        "t": t,
        "p": student_t_two_sided_p(t, n - 1),
    }


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (same order); NaN stays NaN and is not counted.

    Sorted ascending, the k-th of m defined p-values becomes max over j <= k of
    min(1, (m - j) p_(j)) (0-based j): the family-wise error rate is kept at the level.
    """
    order = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    m = len(order)
    adjusted = [math.nan] * len(pvalues)
    running = 0.0
    for j, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - j) * p))
        adjusted[i] = running
    return adjusted


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample std of the finite values; `n` counts them, `nan` the others."""
    finite = [v for v in values if math.isfinite(v)]
    return {
        "mean": statistics.fmean(finite) if finite else math.nan,
        "std": statistics.stdev(finite) if len(finite) > 1 else math.nan,
        "n": float(len(finite)),
        "nan": float(len(values) - len(finite)),
    }
