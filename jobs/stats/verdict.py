"""One sentence per arm, generated from its primary test's numbers only."""

from __future__ import annotations

from jobs.stats.models import Interval, PrimaryTest
from jobs.stats.paired import fmt

LABELS = {
    "exact_match": "exact match",
    "within_5pct": "within 5 %",
    "within_1pct": "within 1 %",
    "digit_accuracy": "digit accuracy",
    "mae": "MAE",
    "median_rel_error": "median rel. error",
    "parse_failure_rate": "parse failures",
    "interval_width_90": "90 % interval's width (× |answer|)",
    "interval_score_90": "90 % interval score",
}


def label(metric: str) -> str:
    return LABELS.get(metric, metric)


def p_text(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"= {p:.2g}"


def span(ci: Interval, sep: str = "…") -> str:
    return f"{fmt(ci.low)}{sep}{fmt(ci.high)}"


def _seeds_note(test: PrimaryTest) -> str:
    if not test.unpaired_seeds:
        return ""
    left = ", ".join(str(s) for s in test.unpaired_seeds)
    return f" (paired on the {test.n} seeds both have; seeds run by one arm only: {left})"


def _no_test(name: str, test: PrimaryTest, baseline: str) -> str:
    what = label(test.metric)
    if test.n == 0 or test.diff is None:
        return f"{name}: no seed in common with `{baseline}`, nothing to compare"
    if test.n == 1:
        return (
            f"{name}: {fmt(test.diff)} {what} on the one seed in common with `{baseline}`; "
            "no test with fewer than 2 paired seeds"
        )
    boot = ""
    if test.ci_boot is not None and test.p_boot is not None:
        interval = span(test.ci_boot, ", ")
        boot = f"; bootstrap over questions [{interval}], p_boot {p_text(test.p_boot)}"
    if test.diff == 0:
        return (
            f"{name}: identical {what} to `{baseline}` on all {test.n} seeds "
            f"(zero variance, no t-test){boot}"
        )
    side = "better" if test.wins == test.n else "worse"
    return (
        f"{name}: {fmt(test.diff)} {what} on every one of {test.n} seeds ({side}; identical "
        f"differences, zero variance, no t-test){boot}"
    )


def verdict(arm: str, test: PrimaryTest, baseline: str, family_size: int, alpha: float) -> str:
    """The arm's verdict against the baseline from its primary test (Holm over the family)."""
    name = f"`{arm}`"
    if test.p is None or test.ci is None or test.diff is None:
        return _no_test(name, test, baseline) + _seeds_note(test)
    what = label(test.metric)
    effect = f"{fmt(test.diff)} {what} [{span(test.ci, ', ')}]"
    margin = fmt(test.margin, signed=False)
    if test.p_holm is not None and test.p_holm < alpha:
        better = (test.diff > 0) == test.higher_is_better
        count = test.wins if better else test.losses
        tail = "recommended" if better else f"worse than `{baseline}`"
        sentence = (
            f"{name}: {effect}, {'better' if better else 'worse'} on {count}/{test.n} seeds, "
            f"p_Holm {p_text(test.p_holm)} — {tail}"
        )
    elif test.equivalent:
        sentence = (
            f"{name}: equivalent to `{baseline}` within ±{margin} {what} "
            f"(TOST p {p_text(test.p_tost or 0.0)}; CI {span(test.ci)})"
        )
    elif test.p < alpha:
        sentence = (
            f"{name}: {effect}, p {p_text(test.p)} but p_Holm {p_text(test.p_holm or 1.0)} "
            f"over {family_size} primary tests — not significant after correction, "
            f"not shown equivalent either"
        )
    else:
        sentence = f"{name}: no detectable effect, not shown equivalent either (CI {span(test.ci)})"
    return sentence + _seeds_note(test)
