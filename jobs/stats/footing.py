"""Was the baseline still improving when its runs stopped? From its learning curves.

A curve is one run's held-out metric at each evaluated step. The baseline is "still rising"
when the mean over its runs at the last step beats the mean at the last step at or before
80 % of it by at least LEVELLED (a share such as exact match: one point) or, for an error
metric, by at least LEVELLED_RELATIVE of its size there. Steps are those every run
evaluated, so the means at both points are over the same runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from jobs.stats.verdict import label

LEVELLED = 0.01  # a share (exact match, within 5 %): one point over the last 20 % of steps
LEVELLED_RELATIVE = 0.01  # an error (MAE, ...): 1 % of its value 20 % of the steps before
SHARES = frozenset({"exact_match", "within_5pct", "within_1pct", "digit_accuracy"})


def still_rising(
    curves: Sequence[Mapping[int, float]], metric: str, higher_is_better: bool
) -> tuple[bool | None, str | None]:
    """(rising, the figures behind it); (None, None) when the curves cannot say (no run,
    no common step before the last, or a value that is not finite)."""
    if not curves:
        return None, None
    steps = sorted(set.intersection(*(set(c) for c in curves)))
    if not steps:
        return None, None
    last = steps[-1]
    earlier = [s for s in steps if s <= 0.8 * last]
    if not earlier:
        return None, None
    mark = earlier[-1]
    at = {s: sum(c[s] for c in curves) / len(curves) for s in (mark, last)}
    if not all(math.isfinite(v) for v in at.values()):
        return None, None
    gain = (at[last] - at[mark]) * (1 if higher_is_better else -1)
    needed = LEVELLED if metric in SHARES else LEVELLED_RELATIVE * abs(at[mark])
    shown = (lambda v: f"{v:.2f}") if metric in SHARES else (lambda v: f"{v:.3g}")
    detail = f"{label(metric)} {shown(at[mark])} at step {mark}, {shown(at[last])} at step {last}"
    return gain >= needed and gain > 0, detail
