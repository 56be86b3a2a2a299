"""A finished study's headline: one bold sentence that reads each primary test's sign, then
which arms were worse, which were shown equivalent and which showed neither, and the
gradient-boosting reference's figures beside `ce`'s (untested).

"Better" and "worse" are Holm-adjusted p below the study's alpha, read against the metric's
direction (a lower MAE is better); "equivalent" is TOST within the registered margin, Holm
over the same family. The first protocol's section opened with such a sentence; protocol 2's
cells had only per-arm verdicts, so a harm in one row could be missed by a reader of another.
"""

from __future__ import annotations

from typing import Any

from jobs.stats.models import PrimaryTest
from jobs.stats.paired import fmt
from jobs.stats.verdict import clause, label


def _named(arm: str, test: PrimaryTest) -> str:
    return f"`{arm}` on {label(test.metric)}"


def _found(arm: str, test: PrimaryTest) -> str:
    # Only a test that survived Holm gets here: it has its difference, CI and p_Holm.
    assert test.diff is not None and test.ci is not None and test.p_holm is not None
    return (
        f"{_named(arm, test)} ({fmt(test.diff)} [{fmt(test.ci.low)}, {fmt(test.ci.high)}], "
        f"p_Holm {test.p_holm:.2g})"
    )


def sorted_tests(comparison: dict[str, Any]) -> dict[str, list[str]]:
    """Each arm's primary tests by what they show: better, worse, equivalent, neither; the
    outcome is the one the verdict sentence states (`jobs.stats.verdict.clause`)."""
    alpha = comparison.get("alpha", 0.05)
    base, size = comparison.get("baseline", "ce"), comparison.get("family_size", 0)
    found: dict[str, list[str]] = {"better": [], "worse": [], "equivalent": [], "neither": []}
    for arm in comparison.get("arms", [])[1:]:
        for raw in arm.get("primary_tests") or []:
            test = PrimaryTest.model_validate(raw)
            outcome = clause(test, base, size, alpha)[1]
            if outcome in ("better", "worse"):
                found[outcome].append(_found(arm["arm"], test))
            elif outcome == "equivalent":
                found["equivalent"].append(f"{_named(arm['arm'], test)} (±{test.margin:g})")
            else:
                found["neither"].append(_named(arm["arm"], test))
    return found


def reference_sentence(result: dict[str, Any]) -> str:
    """The reference's mean on each primary beside the baseline's; empty without one."""
    comparison = result["comparison"]
    reference = (result.get("reference") or {}).get("mean") or {}
    baseline = comparison["arms"][0]
    shown = [
        f"{label(m)} {reference[m]:,.4g} (`{baseline['arm']}` {baseline['mean'][m]:,.4g})"
        for m in comparison["primaries"]
        if reference.get(m) is not None and baseline.get("mean", {}).get(m) is not None
    ]
    if not shown:
        return ""
    return f"The gradient-boosting reference (not a language model, untested): {'; '.join(shown)}."


def headline(result: dict[str, Any]) -> list[str]:
    comparison = result["comparison"]
    base = comparison.get("baseline", "ce")
    found = sorted_tests(comparison)
    primaries = " or ".join(label(m) for m in comparison["primaries"])
    if found["better"]:
        parts = [f"**Better than `{base}`: {'; '.join(found['better'])}.**"]
    else:
        parts = [f"**No arm beat `{base}` on {primaries}.**"]
    if found["worse"]:
        parts.append(f"Worse than `{base}`: {'; '.join(found['worse'])}.")
    if found["equivalent"]:
        parts.append(
            f"Shown equivalent to `{base}` (TOST, Holm over the family): "
            f"{'; '.join(found['equivalent'])}."
        )
    if found["neither"]:
        parts.append(f"Neither a difference nor equivalence shown: {', '.join(found['neither'])}.")
    reference = reference_sentence(result)
    return [" ".join([*parts, reference] if reference else parts)]
