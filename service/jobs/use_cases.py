"""Jobs and sweeps as one caller sees them: get one, list them, cancel one, forget one.

The REST routers (/v1/jobs, /v1/tunes), the OpenAI view and the dashboard all go through
these, so they cannot disagree on who may see or do what: another owner's job reads as
missing (404), and only an admin lists other owners' jobs.
"""

from __future__ import annotations

from service.backends.ray_backend import RayUnreachableError
from service.errors import Conflict, Forbidden, InvalidRequest, NotFound, RayUnavailable
from service.jobs import cancel as cancelling
from service.jobs.run_storage import RunStorage
from service.jobs.states import TERMINAL
from service.store import JobRow, JobStore, Principal


def scope_of(who: Principal) -> str | None:
    """Whose rows `who` reads: everyone's for an admin, else their own."""
    return None if who.is_admin else who.owner


def owned(jobs: JobStore, job_id: str, kind: str, who: Principal) -> JobRow:
    """The job if it exists, is of this kind and the caller may see it; else 404."""
    row = jobs.get(job_id, scope_of(who))
    if row is None or row.kind != kind:
        raise NotFound(f"no {kind} {job_id!r}")
    return row


def listing(
    jobs: JobStore,
    who: Principal,
    *,
    kind: str,
    owner: str | None = None,
    status: str | None = None,
    name: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
    cursor_field: str = "cursor",
) -> tuple[list[JobRow], str | None]:
    """Newest first: the caller's own (an admin's: everyone's, or `owner`'s), and the
    cursor of the next page. Another owner's jobs are a 403 unless the caller is admin;
    a cursor that is not one of ours is a 422 on `cursor_field`."""
    if owner is not None and owner != who.owner and not who.is_admin:
        raise Forbidden("only admin tokens may list other owners' jobs")
    scope = owner if owner is not None else scope_of(who)
    try:
        return jobs.page(
            kind=kind, owner=scope, status=status, name=name, limit=limit, cursor=cursor
        )
    except ValueError as error:
        raise InvalidRequest([{"field": cursor_field, "message": str(error)}]) from error


def remove(
    jobs: JobStore, job_id: str, kind: str, who: Principal, runs: RunStorage | None = None
) -> None:
    """Forget a finished job (its record, metrics and logs) and, given `runs`, its run
    folder unless a study names it; one still going is a 409."""
    row = owned(jobs, job_id, kind, who)
    if row.status not in TERMINAL or not jobs.delete_terminal(row.id):
        raise Conflict(f"{kind} {job_id} is {row.status}; cancel it first")
    if runs is not None:
        runs.forget(row.id, row.owner)


def cancel(canceller: cancelling.Canceller, row: JobRow, who: Principal) -> JobRow:
    """`row` cancelled by `who` (service/jobs/cancel.py: stop it in Ray, then compare-and-set its
    status), as recorded after it; the API's error for each way that can fail: a job that
    ended, even just now by itself, is a 409, and so is one that kept changing state under
    every attempt."""
    try:
        return canceller.cancel(row, who.owner)
    except (cancelling.AlreadyEndedError, cancelling.CancelContendedError) as error:
        raise Conflict(str(error)) from error
    except cancelling.JobGoneError as error:
        raise NotFound(str(error)) from error
    except RayUnreachableError as error:
        raise RayUnavailable(f"could not reach Ray to stop {row.id}: {error}") from error
