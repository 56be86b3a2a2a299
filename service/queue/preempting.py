"""The reconciler's side of preemption: after each admission pass, the plan of
service/queue/preemption.py built from the job rows, and each pause it chose asked for through
the pause machinery (`PauseStore.preempt`: the request and an event on both jobs in one
transaction), with a log line giving the reason. The run then stops at its next step
boundary with a checkpoint, and service/jobs/pausing.py puts it back in the queue.

What can be preempted: a training job (not a sweep, though sweeps can pause: preempting
them is not built) that Ray runs and that has reported a step (a job still starting its
workers has no step boundary to stop at yet).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy.exc import SQLAlchemyError

from service.jobs import pausing
from service.queue.admission import Decision, Policy, free_now, need_of
from service.queue.preemption import Preemption, Running, Waiting, plan_preemptions
from service.queue.priorities import PriorityClasses, class_of
from service.queue.resources import Capacity, Resources
from service.store import JobRow
from service.store.db import Database
from service.store.pauses import PauseStore

log = logging.getLogger(__name__)


def checkpointable(row: JobRow) -> bool:
    return row.kind == "job" and row.status == "running" and row.metrics_count > 0


def _class(classes: PriorityClasses, row: JobRow) -> tuple[int, str]:
    name = class_of(row)
    known = name if name in classes.names else classes.default
    return classes.rank(known), known


def preemption_plan(
    decisions: Sequence[Decision], active: Sequence[JobRow], capacity: Capacity, policy: Policy
) -> list[Preemption]:
    """What the pass's decisions leave for preemption: the jobs held for resources (in
    admission order), the running jobs, and what is free once the admitted ones start."""
    classes = policy.priorities
    waiting = []
    for d in decisions:
        if d.action == "wait" and d.needs is not None:
            rank, name = _class(classes, d.job)
            waiting.append(Waiting(d.job.id, rank, d.needs, name))
    if not waiting:
        return []
    # Free by our own count, not Ray's: a job that ended this pass may still show as held
    # in Ray's report for a moment, and pausing others for that would be for nothing.
    total, free = free_now(Capacity(capacity.total, capacity.total), active, policy)
    for decision in decisions:
        asked = need_of(decision.job) if decision.action == "submit" else None
        free = free - (asked.held(total) if asked else Resources())
    running = []
    for row in active:
        asked = need_of(row)
        rank, name = _class(classes, row)
        started = row.started_at or row.submitted_at or row.created_at
        held = asked.held(total) if asked else Resources()
        pausing = row.pause_requested_at is not None
        running.append(
            Running(row.id, rank, held, started.timestamp(), checkpointable(row), pausing, name)
        )
    return plan_preemptions(waiting, running, free)


def preempt(
    db: Database,
    storage: str,
    decisions: Sequence[Decision],
    active: Sequence[JobRow],
    capacity: Capacity | None,
    policy: Policy,
) -> list[Preemption]:
    """Ask the jobs the plan chose to pause, and hand each run its request at once (not a
    pass later: the waiting job starts sooner); the preemptions asked for."""
    if not policy.preemption or capacity is None:
        return []
    rows = {row.id: row for row in active}
    store = PauseStore(db)
    done = []
    try:
        for chosen in preemption_plan(decisions, active, capacity, policy):
            victim = rows[chosen.victim]
            if store.preempt(victim.id, victim.status, chosen.for_job, chosen.why):
                log.info("preemption: %s", chosen.why)
                done.append(chosen)
                pausing.hand_over(storage, victim)
    except (SQLAlchemyError, OSError):  # the next pass asks again, or hands it over
        log.exception("preemption: could not ask for a pause")
    return done
