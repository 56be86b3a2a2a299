"""Paired tests over seeds (scipy.stats) and the multiplicity adjustments.

A pair is one seed run by both arms (same initial weights and data order), so the unit of
the t-test is the per-seed difference arm − baseline, df = n − 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

# Differences whose spread is below this share of their size are the same number written
# with float noise (0.3 − 0.1 against 0.5 − 0.3): no variance, so no t-test.
ZERO_SPREAD = 1e-12


@dataclass(frozen=True)
class TTest:
    """A paired t-test; every field but n and mean_diff is None when there is no test."""

    n: int
    mean_diff: float | None
    ci: tuple[float, float] | None
    t: float | None
    p: float | None
    d_z: float | None
    reason: str | None  # why there is no test


def zero_spread(diffs: np.ndarray) -> bool:
    scale = max(1.0, float(np.max(np.abs(diffs))))
    return float(np.ptp(diffs)) <= ZERO_SPREAD * scale


def paired_t(a: Sequence[float], b: Sequence[float], alpha: float = 0.05) -> TTest:
    """Two-sided paired t-test of a against b with the (1 − alpha) CI of mean(a − b)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired samples differ in shape: {x.shape} vs {y.shape}")
    n = x.size
    if n == 0:
        return TTest(0, None, None, None, None, None, "no pairs to test")
    diffs = x - y
    mean = float(diffs.mean())
    if n < 2:
        reason = "one pair only: a paired test needs at least 2"
        return TTest(n, mean, None, None, None, None, reason)
    if zero_spread(diffs):
        reason = f"the difference is {fmt(mean)} on every pair (zero variance): no t-test"
        return TTest(n, mean, None, None, None, None, reason)
    result = stats.ttest_rel(x, y)
    ci = result.confidence_interval(confidence_level=1 - alpha)
    return TTest(
        n=n,
        mean_diff=mean,
        ci=(float(ci.low), float(ci.high)),
        t=float(result.statistic),
        p=float(result.pvalue),
        d_z=mean / float(diffs.std(ddof=1)),
        reason=None,
    )


def tost(a: Sequence[float], b: Sequence[float], margin: float) -> float | None:
    """Two one-sided paired tests of −margin < mean(a − b) < margin: the larger p.

    Below alpha, the difference is shown to lie within the margin (equivalence). None
    when there is no test (fewer than 2 pairs, or zero variance)."""
    if margin <= 0:
        raise ValueError(f"the equivalence margin must be positive, got {margin}")
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if diffs.size < 2 or zero_spread(diffs):
        return None
    above = stats.ttest_1samp(diffs, popmean=-margin, alternative="greater")
    below = stats.ttest_1samp(diffs, popmean=margin, alternative="less")
    return float(max(above.pvalue, below.pvalue))


def _defined(pvalues: Sequence[float | None]) -> list[tuple[int, float]]:
    return [(i, p) for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values, same order; None/NaN are not tests (kept None).

    Sorted ascending, the k-th of m defined p-values becomes max over j ≤ k of
    min(1, (m − j) p_(j)) (0-based j): the family-wise error rate stays at the level.
    scipy.stats has no Holm adjustment, hence these lines."""
    tested = sorted(_defined(pvalues), key=lambda item: item[1])
    m = len(tested)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for j, (i, p) in enumerate(tested):
        running = max(running, min(1.0, (m - j) * p))
        adjusted[i] = running
    return adjusted


def benjamini_hochberg(pvalues: Sequence[float | None]) -> list[float | None]:
    """Benjamini–Hochberg adjusted p-values (scipy), same order; None/NaN kept None."""
    tested = _defined(pvalues)
    adjusted: list[float | None] = [None] * len(pvalues)
    if tested:
        values = stats.false_discovery_control([p for _, p in tested], method="bh")
        for (i, _), q in zip(tested, values, strict=True):
            adjusted[i] = float(q)
    return adjusted


def tally(diffs: Sequence[float], higher_is_better: bool) -> tuple[int, int, int]:
    """(wins, losses, ties) of the arm over the pairs, in the metric's better direction."""
    sign = 1.0 if higher_is_better else -1.0
    wins = sum(sign * d > 0 for d in diffs)
    losses = sum(sign * d < 0 for d in diffs)
    return wins, losses, len(diffs) - wins - losses


def fmt(value: float, signed: bool = True) -> str:
    """A difference for a sentence: 2 decimals when that keeps a digit, else 2 significant
    ones; a typographic minus."""
    text = f"{value:+.2f}" if abs(value) >= 0.01 or value == 0 else f"{value:+.2g}"
    if abs(value) >= 1000:
        text = f"{value:+,.0f}"
    text = text if signed else text.lstrip("+")
    return text.replace("-", "−")
