"""Power for a study as a whole: the spread of each arm's paired differences measured from
its runs' per-question answers, the smallest effect the study detects with its seeds ×
questions, the seeds and questions a target effect needs, and what each arm's CI rules out.

Used before a study (a plan from a declared spread or an earlier study's runs) and after it
(the result's `power`, from its own runs); the math is jobs/stats/power.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from jobs.stats.bootstrap import paired_questions, question_values
from jobs.stats.models import Comparison, RunOutcome, higher_is_better
from jobs.stats.paired import fmt
from jobs.stats.power import (
    ALPHA,
    POWER,
    Spread,
    SpreadEstimate,
    detectable_effect,
    estimate_spread,
    level,
    questions_needed,
    rules_out,
    seed_sd_upper,
    seeds_needed,
)

# A median's spread over seeds is not the mean's the model assumes: no plan for it.
MEAN_METRICS = ("exact_match", "within_5pct", "within_1pct", "mae", "digit_accuracy")


class ArmSpread(BaseModel):
    """One arm's paired differences with the baseline, split into their two parts."""

    model_config = ConfigDict(extra="forbid")

    arm: str
    seed_sd: float = Field(description="SD between seeds beyond question sampling")
    question_sd: float = Field(description="SD of the paired difference on one question")
    observed_sd: float = Field(description="SD over seeds of the per-seed difference")
    floor_sd: float = Field(description="question_sd / √questions: question sampling alone")
    seed_sd_upper: float = Field(description="80 % upper confidence bound of seed_sd (χ²)")
    seeds: int
    questions: float
    detectable_effect: float | None = Field(
        None, description="smallest |diff| this arm's own split detects at 80 % power"
    )
    rules_out: str | None = Field(None, description="what the arm's 95 % CI rules out")


class Cautious(BaseModel):
    """The same design if the seed part is as large as its 80 % upper bound."""

    model_config = ConfigDict(extra="forbid")

    seed_sd: float
    detectable_effect: float
    seeds_needed: int | None
    questions_needed: int | None


class PowerReport(BaseModel):
    """What a study can detect, and what it would need for a target effect."""

    model_config = ConfigDict(extra="forbid")

    metric: str
    source: str = Field(description="where the spread comes from")
    seed_sd: float
    question_sd: float
    seeds: int
    questions: float = Field(description="held-out questions per run")
    alpha: float = Field(description="two-sided family-wise level")
    family: int = Field(description="primary tests in the Holm family (m)")
    test_level: float = Field(description="alpha / family: Holm's most conservative step")
    power: float
    detectable_effect: float = Field(
        description="smallest |mean diff| detected with probability `power` at this design"
    )
    target_effect: float | None
    target_from: str | None = Field(None, description="declared, or the equivalence margin")
    seeds_needed: int | None = Field(
        None, description="seeds for target_effect at these questions; None: over 1000"
    )
    questions_needed: int | None = Field(
        None, description="questions for target_effect at these seeds; None: unreachable"
    )
    arms: list[ArmSpread] = Field(default_factory=list)
    cautious: Cautious | None = Field(
        None, description="a measured spread: the design at the seed part's 80 % upper bound"
    )
    statement: str


def paired_diffs(
    arm: Sequence[RunOutcome], base: Sequence[RunOutcome], metric: str
) -> np.ndarray | None:
    """[S, Q] per-question differences arm − base on the seeds both answered the same
    questions on (NaN where the metric does not count); None without such records."""
    a = {r.seed: r for r in arm}
    b = {r.seed: r for r in base}
    usable, _ = paired_questions({s: (a[s].questions, b[s].questions) for s in set(a) & set(b)})
    rows = []
    for seed in usable:
        x = question_values(a[seed].questions, metric)
        y = question_values(b[seed].questions, metric)
        if x is None or y is None:
            return None
        rows.append(x - y)
    return np.stack(rows) if len(rows) >= 2 else None


def arm_spreads(
    arms: Mapping[str, Sequence[RunOutcome]], baseline: str, metric: str
) -> list[ArmSpread]:
    """Each arm's measured split (arms without per-question records of ≥ 2 seeds left out)."""
    out = []
    for name, runs in arms.items():
        if name == baseline:
            continue
        diffs = paired_diffs(runs, arms.get(baseline, []), metric)
        if diffs is None:
            continue
        try:
            found = estimate_spread(diffs)
        except ValueError:
            continue  # e.g. MAE with almost nothing parsed
        out.append(ArmSpread(arm=name, **_fields(found)))
    return out


def _fields(found: SpreadEstimate) -> dict[str, float | int]:
    return {
        "seed_sd": found.seed_sd,
        "question_sd": found.question_sd,
        "observed_sd": found.observed_sd,
        "floor_sd": found.floor_sd,
        "seed_sd_upper": seed_sd_upper(found),
        "seeds": found.seeds,
        "questions": found.questions,
    }


def widest(spreads: Sequence[ArmSpread]) -> Spread:
    """The spread to plan with: per part, the largest over arms (a plan for every arm)."""
    return Spread(max(s.seed_sd for s in spreads), max(s.question_sd for s in spreads))


def widest_upper(spreads: Sequence[ArmSpread]) -> float:
    """The largest 80 % upper bound of the seed part over arms."""
    return max(s.seed_sd_upper for s in spreads)


def _cautious(
    spread: Spread, upper: float, seeds: int, questions: float, target: float | None, **level: Any
) -> tuple[Cautious, str]:
    """The design at the seed part's upper bound, and a sentence for it."""
    wide = Spread(upper, spread.question_sd)
    found = Cautious(
        seed_sd=upper,
        detectable_effect=detectable_effect(wide, seeds, questions, **level),
        seeds_needed=None if target is None else seeds_needed(target, wide, questions, **level),
        questions_needed=None if target is None else questions_needed(target, wide, seeds, **level),
    )
    text = (
        f" If the seed part is as large as its 80 % upper bound ({upper:.3g}), the smallest "
        f"detected is ±{fmt(found.detectable_effect, signed=False)}"
    )
    if target is not None:
        more = "more than 1000" if found.seeds_needed is None else str(found.seeds_needed)
        text += f" and ±{fmt(target, signed=False)} needs {more} seeds"
    return found, text + "."


def report(
    spread: Spread,
    *,
    metric: str,
    source: str,
    seeds: int,
    questions: float,
    family: int,
    target_effect: float | None = None,
    target_from: str | None = None,
    arms: Sequence[ArmSpread] = (),
    alpha: float = ALPHA,
    upper_seed_sd: float | None = None,
) -> PowerReport:
    """The plan or the post-hoc statement for one design (seeds × questions, Holm family)."""
    smallest = detectable_effect(spread, seeds, questions, alpha, family)
    need_seeds = need_questions = None
    if target_effect is not None:
        need_seeds = seeds_needed(target_effect, spread, questions, alpha, family)
        need_questions = questions_needed(target_effect, spread, seeds, alpha, family)
    sentence = (
        f"With {seeds} seeds × {questions:.0f} questions (seed SD {spread.seed_sd:.3g}, "
        f"question SD {spread.question_sd:.3g}; {source}), the smallest {metric} difference "
        f"detected at {POWER:.0%} power is ±{fmt(smallest, signed=False)} (two-sided, "
        f"alpha {alpha:g}/{family} = {level(alpha, family):.3g}, Holm's strictest step)."
    )
    if target_effect is not None:
        seeds_text = "more than 1000 seeds" if need_seeds is None else f"{need_seeds} seeds"
        questions_text = (
            "no number of questions (the seed part alone is too large)"
            if need_questions is None
            else f"{need_questions} questions per run"
        )
        sentence += (
            f" ±{fmt(target_effect, signed=False)} needs {seeds_text} at {questions:.0f} "
            f"questions, or {questions_text} at {seeds} seeds."
        )
    cautious = None
    if upper_seed_sd is not None and upper_seed_sd > spread.seed_sd:
        cautious, text = _cautious(
            spread, upper_seed_sd, seeds, questions, target_effect, alpha=alpha, family=family
        )
        sentence += text
    return PowerReport(
        metric=metric,
        source=source,
        seed_sd=spread.seed_sd,
        question_sd=spread.question_sd,
        seeds=seeds,
        questions=questions,
        alpha=alpha,
        family=family,
        test_level=level(alpha, family),
        power=POWER,
        detectable_effect=smallest,
        target_effect=target_effect,
        target_from=target_from,
        seeds_needed=need_seeds,
        questions_needed=need_questions,
        arms=list(arms),
        cautious=cautious,
        statement=sentence,
    )


def after_study(
    comparison: Comparison,
    arms: Mapping[str, Sequence[RunOutcome]],
    *,
    target_effect: float | None = None,
) -> PowerReport | None:
    """A finished study's power from its own runs: each arm's split, the smallest effect
    each (and the study, planned on the widest split) could have detected, what each arm's
    CI rules out, and the seeds and questions the target (default: the equivalence margin)
    would need. None when no arm has per-question records of ≥ 2 seeds, or the primary
    metric is a median."""
    metric = comparison.primary
    if metric not in MEAN_METRICS:
        return None
    spreads = arm_spreads(arms, comparison.baseline, metric)
    if not spreads:
        return None
    family = max(1, comparison.family_size)
    tests = {a.arm: a.vs_ce for a in comparison.arms}
    for spread in spreads:
        own = Spread(spread.seed_sd, spread.question_sd) if spread.observed_sd > 0 else None
        if own is not None:
            spread.detectable_effect = detectable_effect(
                own, spread.seeds, spread.questions, comparison.alpha, family
            )
        test = tests.get(spread.arm)
        if test is not None and test.ci is not None:
            spread.rules_out = rules_out(test.ci.low, test.ci.high, higher_is_better(metric))
    declared = target_effect is not None
    target = target_effect if declared else comparison.margin
    return report(
        widest(spreads),
        metric=metric,
        source="this study's runs, the widest split over its arms",
        seeds=max(s.seeds for s in spreads),
        questions=max(s.questions for s in spreads),
        family=family,
        target_effect=target,
        target_from="declared" if declared else ("equivalence margin" if target else None),
        arms=spreads,
        alpha=comparison.alpha,
        upper_seed_sd=widest_upper(spreads),
    )
