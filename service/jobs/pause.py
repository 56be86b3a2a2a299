"""Pause and resume a job, as its owner asks (the REST routers, the OpenAI view, the
dashboard and the CLI all come here).

- pause: a queued job is held (it is not admitted until resumed); a submitted or running
  one is asked to stop at its next step boundary with a checkpoint (it reads `running`
  with `pause_requested_at` until the reconciler records it `paused`); a paused job, or
  one already asked, is answered as it is (idempotent); an ended one is a 409. A job the
  scheduler is pausing for a higher-priority one (preempted) stays paused once asked here
  too, rather than going back in the queue by itself.
- resume: a paused job goes back in the queue and continues from its checkpoint; a queued
  or running one is answered as it is; one still on its way to a pause is a 409 (resume it
  once paused); an ended one is a 409.

Another owner's job reads as missing (404), as everywhere. Each pause and resume is an
event on the job with who asked (`events`).
"""

from __future__ import annotations

from service.errors import Conflict, NotFound
from service.jobs.states import TERMINAL
from service.jobs.use_cases import owned
from service.store import JobRow, JobStore, Principal
from service.store.pauses import EventRow, PauseStore

ATTEMPTS = 5  # compare-and-set tries against the reconciler moving the job on


def _reread(jobs: JobStore, row: JobRow) -> JobRow:
    fresh = jobs.get(row.id)
    if fresh is None:
        raise NotFound(f"no {row.kind} {row.id!r}")
    return fresh


def _ended(row: JobRow, verb: str) -> Conflict:
    return Conflict(f"{row.kind} {row.id} is {row.status}: an ended job cannot be {verb}")


def pause(jobs: JobStore, job_id: str, who: Principal, kind: str = "job") -> JobRow:
    row = owned(jobs, job_id, kind, who)
    store = PauseStore(jobs.db)
    for _ in range(ATTEMPTS):
        if row.status in TERMINAL:
            raise _ended(row, "paused")
        if row.status == "paused" or row.pause_requested_at is not None:
            if row.pause_requested_at is not None and store.preempted(row.id):
                # The scheduler is pausing it (preempted): the owner's ask keeps it paused.
                store.note(row.id, "pause_requested", who.owner, "while it was preempted")
                row = _reread(jobs, row)
                if row.status == "queued":
                    continue  # queued again by the scheduler meanwhile: hold it there
            return row
        if row.status == "queued":
            done = store.hold(row.id, who.owner)
        else:
            done = store.request(row.id, row.status, who.owner)
        row = _reread(jobs, row)
        if done:
            return row
    raise Conflict(f"{kind} {job_id} changed state during each of {ATTEMPTS} attempts; try again")


def resume(jobs: JobStore, job_id: str, who: Principal, kind: str = "job") -> JobRow:
    row = owned(jobs, job_id, kind, who)
    store = PauseStore(jobs.db)
    for _ in range(ATTEMPTS):
        if row.status in TERMINAL:
            raise _ended(row, "resumed")
        if row.status != "paused":
            if row.pause_requested_at is not None:
                raise Conflict(
                    f"{kind} {job_id} is pausing (it stops at its next step boundary); "
                    "resume it once it is paused"
                )
            return row  # queued or running: nothing to resume
        done = store.resume(row.id, who.owner)
        row = _reread(jobs, row)
        if done:
            return row
    raise Conflict(f"{kind} {job_id} changed state during each of {ATTEMPTS} attempts; try again")


def events(jobs: JobStore, job_id: str, who: Principal, kind: str = "job") -> list[EventRow]:
    """The job's pauses and resumes, oldest first."""
    row = owned(jobs, job_id, kind, who)
    return PauseStore(jobs.db).events(row.id)
