"""Cancelling a job: stop it in Ray, then compare-and-set its status to `cancelled`.

The reconciler may move the job on at the same moment (submit it, see it running, or
record an end Ray already reported), so the status write is a compare-and-set that is
retried from a fresh read, a bounded number of times. A job that Ray saw finish by
itself keeps that real outcome: it is recorded, and the cancel is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from service.backends.ray_backend import TERMINAL_RAY, Backend, RayJobMissingError
from service.jobs.states import TERMINAL
from service.store import JobRow, JobStore

ATTEMPTS = 5


class AlreadyEndedError(Exception):
    """The job is finished (maybe just now, by itself); `row` holds its outcome."""

    def __init__(self, row: JobRow):
        super().__init__(f"{row.kind} {row.id} already {row.status}")
        self.row = row


class JobGoneError(Exception):
    """The job was deleted while we cancelled it (so it had ended)."""


class CancelContendedError(Exception):
    """Every attempt's compare-and-set lost to another writer; nothing was cancelled."""


def finished_in_ray(backend: Backend, job_id: str) -> bool:
    """Ray reports the job succeeded or failed by itself (not stopped by us)."""
    try:
        status = backend.info(job_id).status
    except RayJobMissingError:
        return False
    return status in TERMINAL_RAY - {"STOPPED"}


def cancel(
    jobs: JobStore,
    backend: Backend,
    row: JobRow,
    by: str,
    record_end: Callable[[JobRow], object],
    attempts: int = ATTEMPTS,
) -> JobRow:
    """Cancel `row` on behalf of `by`; the job as recorded after it. `record_end` records
    the outcome of a job Ray saw finish (the reconciler's follow). Raises
    AlreadyEndedError, JobGoneError, CancelContendedError, or the backend's
    RayUnreachableError."""
    for _ in range(attempts):
        if row.status in TERMINAL:
            raise AlreadyEndedError(row)
        # A queued job is not in Ray yet, a paused one no more: the compare-and-set alone
        # keeps it out.
        if row.status not in ("queued", "paused"):
            if finished_in_ray(backend, row.ray_id):
                record_end(row)
                row = _reread(jobs, row)
                continue
            backend.stop(row.ray_id)
            if finished_in_ray(backend, row.ray_id):  # it ended between our look and the stop
                continue
        if jobs.cancel(row.id, row.status, by):
            return _reread(jobs, row)
        row = _reread(jobs, row)
    raise CancelContendedError(
        f"{row.kind} {row.id} changed state during each of {attempts} attempts to cancel it "
        f"(now {row.status}); try again"
    )


@dataclass(frozen=True)
class Canceller:
    """cancel() with what it needs bound: the jobs, Ray, and `record_end`, which records
    the outcome of a job Ray saw finish meanwhile (the reconciler's follow)."""

    jobs: JobStore
    backend: Backend
    record_end: Callable[[JobRow], object]

    def cancel(self, row: JobRow, by: str) -> JobRow:
        return cancel(self.jobs, self.backend, row, by, self.record_end)


def _reread(jobs: JobStore, row: JobRow) -> JobRow:
    fresh = jobs.get(row.id)
    if fresh is None:
        raise JobGoneError(f"no {row.kind} {row.id!r}")
    return fresh
