"""A study's plan before it runs (`dry_run: true` on POST /v1/studies, `numtune study plan`),
and its power statement after (the result's `power`).

The plan's spread of paired differences (seed part, question part) comes from the spec's
`power`: declared (`seed_sd`, `question_sd`), or measured from the per-question answers of
an earlier study of the same owner on the same task (`from_study`). Without either the
plan says it cannot plan. (A pilot of 2 seeds run by the service for the purpose is not
built: run a 2-seed study and name it as `from_study`.) Holm's family is the study's
primary tests, one per arm; every figure is at alpha / arms, Holm's strictest step.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from jobs.spec import BASELINE, StudySpec
from jobs.spec.parts import DataSpec
from jobs.stats import Comparison, QuestionRecord, RunOutcome
from jobs.stats.power import Spread
from jobs.stats.power_study import (
    MEAN_METRICS,
    PowerReport,
    after_study,
    arm_spreads,
    report,
    widest_upper,
)
from jobs.stats.power_study import widest as widest_spread
from service.errors import InvalidSpec
from service.store import Principal, StudyRow, StudyStore

NO_SPREAD = (
    "no spread to plan with: declare power.seed_sd and power.question_sd, or name "
    "power.from_study (an earlier study of yours on this task, e.g. a 2-seed pilot)"
)


class StudyPlan(BaseModel):
    """What POST /v1/studies with `dry_run: true` answers: nothing was queued."""

    dry_run: bool = True
    queued: int = Field(0, description="jobs queued: none, it is a plan")
    name: str
    primary_metric: str
    arms: list[str] = Field(description="ce first, then the arms")
    seeds: int
    questions: int = Field(description="held-out questions per run (base.data.eval_size)")
    runs: int = Field(description="evaluation runs the study would queue")
    power: PowerReport | None = Field(None, description="None: nothing to plan with (detail)")
    detail: str | None = None


def _problem(message: str) -> InvalidSpec:
    return InvalidSpec([{"field": "power.from_study", "message": message}])


def _source(data: DataSpec) -> tuple[Any, ...]:
    """What makes two studies' questions the same task: the task and where its rows come
    from (an uploaded file's id, else its path; a generated task's modules and split)."""
    return (
        data.task,
        data.file or data.path,
        data.eval_file or data.eval_path,
        tuple(data.modules),
        data.eval_split,
    )


def recorded_outcomes(result: Mapping[str, Any]) -> dict[str, list[RunOutcome]]:
    """Per arm, the evaluation runs a finished study's result kept with their answers."""
    arms: dict[str, list[RunOutcome]] = defaultdict(list)
    for run in result.get("runs") or []:
        answers = run.get("predictions")
        if run.get("kind") != "job" or not answers or run.get("seed") is None:
            continue
        questions = [QuestionRecord.model_validate(q) for q in answers]
        arms[run["arm"]].append(
            RunOutcome(seed=run["seed"], run_id=run.get("job_id"), metrics={}, questions=questions)
        )
    return arms


def measured(spec: StudySpec, earlier: StudyRow, metric: str) -> tuple[Spread, float]:
    """The widest split over the earlier study's arms on `metric`, and the largest 80 %
    upper bound of their seed parts."""
    if _source(earlier.spec.base.data) != _source(spec.base.data):
        raise _problem(
            f"study {earlier.id} ran another task or data ({earlier.spec.base.data.task}); "
            "a spread measured there does not carry over"
        )
    if earlier.result is None:
        raise _problem(f"study {earlier.id} has no result yet ({earlier.status})")
    spreads = arm_spreads(recorded_outcomes(earlier.result), BASELINE, metric)
    if not spreads:
        raise _problem(
            f"study {earlier.id} kept no per-question answers of ce and an arm on 2 or more "
            f"seeds for {metric}"
        )
    try:
        return widest_spread(spreads), widest_upper(spreads)
    except ValueError as error:  # every paired difference identical: no spread
        raise _problem(f"study {earlier.id}: {error}") from error


def primaries(spec: StudySpec) -> list[str]:
    """The spec's primary metrics: one name, or a list of them."""
    declared: str | Sequence[str] = spec.primary_metric
    return [declared] if isinstance(declared, str) else list(declared)


def margin_of(spec: StudySpec, metric: str) -> float | None:
    """The equivalence margin of `metric`: one for every primary, or its own."""
    margin: float | Mapping[Any, float] = spec.equivalence_margin
    return margin.get(metric) if isinstance(margin, Mapping) else margin


def _target_from(declared: float | None, target: float | None) -> str | None:
    return "declared" if declared else ("equivalence margin" if target else None)


def plan(spec: StudySpec, studies: StudyStore, who: Principal) -> StudyPlan:
    """The plan of a checked spec for its first primary metric (a spread has one metric's
    units), at Holm's strictest step over every primary × arm; queues nothing."""
    metric = primaries(spec)[0]
    shown: dict[str, Any] = {
        "name": spec.name,
        "primary_metric": metric,
        "arms": [BASELINE, *spec.labels()],
        "seeds": len(spec.seeds),
        "questions": spec.base.data.eval_size,
        "runs": spec.total_runs,
    }
    declared = spec.power
    if metric not in MEAN_METRICS:
        return StudyPlan(**shown, detail=f"no plan for {metric}: not a mean over questions")
    if declared is None or not (declared.declared or declared.from_study):
        return StudyPlan(**shown, detail=NO_SPREAD)
    upper: float | None  # the measured seed part's 80 % upper bound
    if declared.from_study is not None:
        earlier = studies.get(declared.from_study, who.owner)
        if earlier is None:
            raise _problem(f"no study {declared.from_study!r} of yours")
        spread, upper = measured(spec, earlier, metric)
        source: str = f"measured in study {earlier.id}"
    else:
        spread = Spread(declared.seed_sd or 0.0, declared.question_sd or 0.0)
        upper, source = None, "declared in the spec"
    target = declared.target_effect or margin_of(spec, metric)
    power = report(
        spread,
        metric=metric,
        source=source,
        seeds=len(spec.seeds),
        questions=spec.base.data.eval_size,
        family=len(spec.arms) * len(primaries(spec)),  # Holm over every primary × arm
        target_effect=target,
        target_from=_target_from(declared.target_effect, target),
        upper_seed_sd=upper,
    )
    return StudyPlan(**shown, power=power)


def after(
    spec: StudySpec, comparison: Comparison, arms: Mapping[str, Sequence[RunOutcome]]
) -> dict[str, Any] | None:
    """A finished study's `power`: from its own runs' split, the smallest effect it could
    have detected, what each arm's CI rules out, and what the target would need."""
    target = spec.power.target_effect if spec.power is not None else None
    try:
        found = after_study(comparison, arms, target_effect=target)
    except ValueError:  # every paired difference identical: no spread to speak of
        return None
    return None if found is None else found.model_dump(mode="json")
