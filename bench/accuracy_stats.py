"""Statistics for the accuracy table in the form its JSON stores: per metric a dict of
floats with NaN where a figure is undefined.

The tests themselves are jobs.stats's (scipy's paired t-test and Holm's adjustment), so the
bench and the service compute the same numbers; this file only adapts their types.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from jobs.stats import holm as holm_adjust
from jobs.stats import paired_t


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Two-sided paired t-test of a against b (pairs with a non-finite side are dropped).

    Returns n, the mean difference a - b, its 95 % confidence interval (ci_low, ci_high),
    the effect size d_z, t and p; NaN where undefined (fewer than two pairs, or the same
    difference on every pair)."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if math.isfinite(x) and math.isfinite(y)]
    test = paired_t([x for x, _ in pairs], [y for _, y in pairs])
    low, high = test.ci if test.ci is not None else (math.nan, math.nan)
    return {
        "n": float(test.n),
        "mean_diff": _nan(test.mean_diff),
        "ci_low": low,
        "ci_high": high,
        "d_z": _nan(test.d_z),
        "t": _nan(test.t),
        "p": _nan(test.p),
    }


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values in the same order; NaN stays NaN and is not counted."""
    return [_nan(p) for p in holm_adjust(pvalues)]


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample std of the finite values; `n` counts them, `nan` the others."""
    finite = [v for v in values if math.isfinite(v)]
    return {
        "mean": statistics.fmean(finite) if finite else math.nan,
        "std": statistics.stdev(finite) if len(finite) > 1 else math.nan,
        "n": float(len(finite)),
        "nan": float(len(values) - len(finite)),
    }
