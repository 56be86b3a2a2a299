"""Admission: which queued jobs go to Ray now, in what order the rest wait, and why.

Ray never sees a job that cannot start: a job handed to Ray while another holds the CPUs
waits for its worker group, and Ray Train gives up after 60 s per attempt (three attempts,
then the job fails with `insufficient_resources`). So the reconciler submits a queued job
only when its workers fit what is free, and keeps the others `queued` with their place in
line and what they wait for. A job that needs more than the whole cluster is refused at
once (`does_not_fit`) with what would fit.

Order: submission order, with fairness between owners: an owner's k-th waiting job ranks
after every other owner's earlier ones (counting the jobs each owner had started since the
oldest waiting job came in), so one owner's batch does not hold everyone else back. The
head of the line is never overtaken by a smaller job behind it (that would starve big
jobs); jobs held only by their owner's concurrency limit step aside and block nobody.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from jobs.spec import TRIAL_DRIVER_CPU, JobSpec, TuneSpec
from service.states import JobReason
from service.store import JobRow

EPSILON = 1e-9


@dataclass(frozen=True)
class Resources:
    cpu: float = 0.0
    gpu: float = 0.0

    def fits_in(self, other: Resources) -> bool:
        return self.cpu <= other.cpu + EPSILON and self.gpu <= other.gpu + EPSILON

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.gpu + other.gpu)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(max(0.0, self.cpu - other.cpu), max(0.0, self.gpu - other.gpu))

    def __str__(self) -> str:
        text = f"{self.cpu:g} CPU"
        return f"{text}, {self.gpu:g} GPU" if self.gpu else text


@dataclass(frozen=True)
class Capacity:
    """The cluster as Ray reports it: everything it has, and what is unreserved now."""

    total: Resources
    available: Resources


@dataclass(frozen=True)
class Need:
    start: Resources  # free resources it needs to start: a job's workers, one trial
    copies: int = 1  # how many of those it may hold at once (a sweep's concurrent trials)

    def held(self, total: Resources) -> Resources:
        """The most it may hold once running: no more trials than the cluster has room for."""
        fits = math.floor(total.cpu / self.start.cpu + EPSILON) if self.start.cpu else 1
        if self.start.gpu:
            fits = min(fits, math.floor(total.gpu / self.start.gpu + EPSILON))
        count = max(1, min(fits, self.copies))
        return Resources(self.start.cpu * count, self.start.gpu * count)


def need(kind: str, spec: dict[str, Any]) -> Need | None:
    """What the job asks of the cluster; None if its stored spec no longer validates."""
    try:
        if kind == "tune":
            tune = TuneSpec.model_validate(spec)
            return Need(
                Resources(*tune.trial_reserved), tune.max_concurrent_trials or tune.total_trials
            )
        return Need(Resources(*JobSpec.model_validate(spec).scaling.reserved))
    except ValidationError:
        return None


def does_not_fit(kind: str, spec: dict[str, Any], start: Resources, total: Resources) -> str:
    if kind == "tune":
        what, prefix, room = "one trial of this sweep needs", "base.scaling", TRIAL_DRIVER_CPU
        scaling = spec["base"].get("scaling", {})
    else:
        what, prefix, room = "this job's workers need", "scaling", 0.0
        scaling = spec.get("scaling", {})
    workers = int(scaling.get("num_workers", 1))
    most = max(0.0, math.floor((total.cpu - room) / workers * 100) / 100)  # rounded down
    return (
        f"{what} {start} but the whole cluster has {total}. What fits: "
        f"{prefix}.cpus_per_worker <= {most:.2f} with {workers} workers, or fewer workers"
    )


Action = Literal["submit", "wait", "reject"]


@dataclass(frozen=True)
class Decision:
    job: JobRow
    action: Action
    position: int | None = None
    why: str | None = None  # what it waits for, or why it can never run
    reason: JobReason | None = None  # the failure reason code of a rejection


def fair_order(queued: Sequence[JobRow], served: Counter[str]) -> list[JobRow]:
    """Oldest first, but an owner's k-th waiting job ranks after every other owner's
    (k-1)-th, counting the jobs each owner already had started while the oldest one
    waited (`served`): round robin between owners."""
    seen: Counter[str] = Counter()
    ranked = []
    for row in sorted(queued, key=lambda r: (r.created_at, r.id)):
        ranked.append((served[row.owner] + seen[row.owner], row.created_at, row.id, row))
        seen[row.owner] += 1
    return [row for *_, row in sorted(ranked, key=lambda t: t[:3])]


def plan(
    queued: Sequence[JobRow],
    active: Sequence[JobRow],
    capacity: Capacity | None,
    *,
    served: Counter[str] | None = None,
    max_running_per_owner: int | None = None,
    unknown: str = "Ray's cluster status (not reported yet)",
) -> list[Decision]:
    """A decision for every queued job. `active` are the jobs Ray has (submitted/running);
    `capacity` None means Ray's resources are unknown right now (`unknown` says why);
    `served` counts by owner the jobs started since the oldest queued one was submitted."""
    running = Counter(row.owner for row in active)
    order = fair_order(queued, served or Counter())
    if capacity is None:
        return [Decision(r, "wait", i + 1, unknown) for i, r in enumerate(order)]
    total = capacity.total
    holding = Resources()
    for row in active:
        asked = need(row.kind, row.spec)
        holding = holding + (asked.held(total) if asked else Resources())
    # Ray's own view lags a job just handed to it; ours misses what others reserved.
    free = Resources(
        min(capacity.available.cpu, max(0.0, total.cpu - holding.cpu)),
        min(capacity.available.gpu, max(0.0, total.gpu - holding.gpu)),
    )
    decisions: list[Decision] = []
    blocked_by: JobRow | None = None
    position = 0
    for row in order:
        needed = need(row.kind, row.spec)
        if needed is None:
            why = "the stored spec does not validate"
            decisions.append(Decision(row, "reject", why=why, reason="invalid_spec"))
            continue
        if not needed.start.fits_in(total):
            why = does_not_fit(row.kind, row.spec, needed.start, total)
            decisions.append(Decision(row, "reject", why=why, reason="does_not_fit"))
            continue
        limit = max_running_per_owner
        if limit is not None and running[row.owner] >= limit:
            position += 1
            why = f"owner limit: {running[row.owner]} of {row.owner}'s jobs running (limit {limit})"
            decisions.append(Decision(row, "wait", position, why))
            continue
        if blocked_by is None and needed.start.fits_in(free):
            decisions.append(Decision(row, "submit"))
            free = free - needed.held(total)
            running[row.owner] += 1
            continue
        position += 1
        if blocked_by is None:
            blocked_by = row
            why = f"resources: needs {needed.start}, {free} free of {total}"
        else:
            why = f"its turn: {blocked_by.id} is ahead of it, waiting for resources"
        decisions.append(Decision(row, "wait", position, why))
    return decisions


def over_ceilings(
    spec: JobSpec | TuneSpec, *, max_steps: int, max_trials: int, max_timeout_s: float | None
) -> list[dict[str, str]]:
    """Fields beyond the service's ceilings (admin settings), as 422 problems."""
    base, prefix = (spec.base, "base.") if isinstance(spec, TuneSpec) else (spec, "")
    problems = []
    if base.train.steps is not None and base.train.steps > max_steps:
        problems.append(
            {"field": f"{prefix}train.steps", "message": f"at most {max_steps} on this service"}
        )
    if isinstance(spec, TuneSpec) and spec.total_trials > max_trials:
        message = f"{spec.total_trials} trials in all; at most {max_trials} on this service"
        problems.append({"field": "num_samples", "message": message})
    if max_timeout_s is not None and spec.timeout_s is not None and spec.timeout_s > max_timeout_s:
        message = f"at most {max_timeout_s:g} s on this service"
        problems.append({"field": "timeout_s", "message": message})
    return problems
