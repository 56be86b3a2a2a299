"""One sentence per arm, generated from its primary tests' numbers and what they rest on.

A gain that survives Holm is "recommended" only where `ce` had its learning rate tuned with
the arms' budget and had stopped improving at that budget (`Footing`); otherwise the sentence
says "better than `ce` at N steps" and names each condition not met. A harm that survives
Holm reads "worse than `ce`" whatever else the arm did."""

from __future__ import annotations

from jobs.stats.models import Footing, Interval, PrimaryTest
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
    "log_error": "log error",
    "crps": "CRPS",
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


def _no_test(test: PrimaryTest, baseline: str) -> str:
    what = label(test.metric)
    if test.n == 0 or test.diff is None:
        return f"no seed in common with `{baseline}`, nothing to compare"
    if test.n == 1:
        return (
            f"{fmt(test.diff)} {what} on the one seed in common with `{baseline}`; "
            "no test with fewer than 2 paired seeds"
        )
    boot = ""
    if test.ci_boot is not None and test.p_boot is not None:
        interval = span(test.ci_boot, ", ")
        boot = f"; bootstrap over questions [{interval}], p_boot {p_text(test.p_boot)}"
    if test.diff == 0:
        return (
            f"identical {what} to `{baseline}` on all {test.n} seeds "
            f"(zero variance, no t-test){boot}"
        )
    side = "better" if test.wins == test.n else "worse"
    return (
        f"{fmt(test.diff)} {what} on every one of {test.n} seeds ({side}; identical "
        f"differences, zero variance, no t-test){boot}"
    )


def clause(test: PrimaryTest, baseline: str, family_size: int, alpha: float) -> tuple[str, str]:
    """One primary test in words, and its outcome: better or worse (survives Holm),
    equivalent (TOST, Holm over the family), or none."""
    if test.p is None or test.ci is None or test.diff is None:
        return _no_test(test, baseline), "none"
    what = label(test.metric)
    effect = f"{fmt(test.diff)} {what} [{span(test.ci, ', ')}]"
    if test.p_holm is not None and test.p_holm < alpha:
        better = (test.diff > 0) == test.higher_is_better
        count = test.wins if better else test.losses
        side = "better" if better else "worse"
        return f"{effect}, {side} on {count}/{test.n} seeds, p_Holm {p_text(test.p_holm)}", side
    if test.equivalent:
        margin = fmt(test.margin or 0.0, signed=False)
        p_tost = test.p_tost_holm if test.p_tost_holm is not None else test.p_tost
        return (
            f"equivalent to `{baseline}` within ±{margin} {what} "
            f"(TOST p_Holm {p_text(p_tost or 0.0)}; CI {span(test.ci)})"
        ), "equivalent"
    if test.p < alpha:
        return (
            f"{effect}, p {p_text(test.p)} but p_Holm {p_text(test.p_holm or 1.0)} "
            f"over {family_size} primary tests: not significant after correction, "
            f"not shown equivalent either"
        ), "none"
    on = "" if test.metric == "exact_match" else f" on {what}"
    return f"no detectable effect{on}, not shown equivalent either (CI {span(test.ci)})", "none"


def _unearned(baseline: str, footing: Footing | None) -> list[str]:
    """Why a significant gain is not a recommendation: the conditions it did not meet."""
    footing = footing or Footing()
    missing = []
    if not footing.baseline_tuned:
        missing.append(f"`{baseline}`'s learning rate not tuned")
    if footing.baseline_rising is None:
        missing.append(f"whether `{baseline}` had levelled off not measured")
    elif footing.baseline_rising:
        detail = f" ({footing.rising_detail})" if footing.rising_detail else ""
        missing.append(f"`{baseline}` still rising{detail}")
    return missing


def tail(
    outcomes: dict[str, str], baseline: str, footing: Footing | None, metrics: list[str]
) -> str:
    """The verdict's conclusion: a harm that survives Holm reads as one; a gain is
    "recommended" only on equal footing (ce tuned, ce levelled), else it names the condition."""
    better = [m for m in metrics if outcomes.get(m) == "better"]
    worse = [m for m in metrics if outcomes.get(m) == "worse"]
    if worse:
        harms = ", ".join(label(m) for m in worse)
        if better:
            gains = ", ".join(label(m) for m in better)
            return f" — worse than `{baseline}` on {harms} (better on {gains}): not recommended"
        return f" — worse than `{baseline}`" + (f" on {harms}" if len(metrics) > 1 else "")
    if not better:
        return ""
    missing = _unearned(baseline, footing)
    if not missing:
        return " — recommended"
    steps = f" at {footing.steps} steps" if footing and footing.steps else ""
    return f" — better than `{baseline}`{steps}; " + "; ".join(missing)


def verdict(
    arm: str,
    tests: PrimaryTest | list[PrimaryTest],
    baseline: str,
    family_size: int,
    alpha: float,
    footing: Footing | None = None,
) -> str:
    """The arm's verdict against the baseline from its primary tests (Holm over the family),
    saying what it rests on (`footing`)."""
    tests = [tests] if isinstance(tests, PrimaryTest) else tests
    parts = [clause(t, baseline, family_size, alpha) for t in tests]
    outcomes = {t.metric: outcome for t, (_, outcome) in zip(tests, parts, strict=True)}
    text = "; ".join(part for part, _ in parts)
    seeds = _seeds_note(tests[0]) if tests else ""
    return f"`{arm}`: {text}{tail(outcomes, baseline, footing, [t.metric for t in tests])}{seeds}"
