"""OpenAI's fine-tuning API over numtune's jobs: create (through the same submission as
POST /v1/jobs), list, get, cancel, events and checkpoints. Any training job can be read
here; `service/fine_tuning/views.py` maps each way between the two shapes."""

from __future__ import annotations

from service.errors import InvalidSpec
from service.fine_tuning import views as ft
from service.fine_tuning.schemas import (
    CheckpointList,
    EventList,
    FineTuningJob,
    FineTuningJobCreate,
    FineTuningJobList,
)
from service.jobs import pause as pausing
from service.jobs.cancel import Canceller
from service.jobs.submit import Submission
from service.jobs.use_cases import cancel as cancel_job
from service.jobs.use_cases import listing, owned, scope_of
from service.registry import Registry
from service.store import FileStore, JobRow, JobStore, Principal
from service.store.pages import encode_cursor
from service.store.pauses import PauseStore


def shown(registry: Registry, rows: list[JobRow]) -> list[FineTuningJob]:
    """The rows as fine-tuning jobs, each with the version it was registered as."""
    refs = ft.registered(registry.of_jobs([r.id for r in rows]))
    return [ft.view(r, refs.get(r.id)) for r in rows]


def rows_in(files: FileStore, file_id: str, field: str, who: Principal) -> int:
    """The row count of a file the body names; a 422 naming the field if there is none."""
    found = files.get(file_id, scope_of(who))
    if found is None:
        raise InvalidSpec([{"field": field, "message": f"no file {file_id!r}"}])
    return found.rows


def create(
    submission: Submission, body: FineTuningJobCreate, who: Principal, key: str | None
) -> FineTuningJob:
    """The job a create asks for, recorded (queued) as POST /v1/jobs records one."""
    rows = rows_in(submission.files, body.training_file, "training_file", who)
    held = body.validation_file
    eval_rows = rows_in(submission.files, held, "validation_file", who) if held else None
    name = ft.job_name(body.suffix, who.owner, key)
    spec = ft.to_spec(body, name, rows, eval_rows)
    row, _ = submission.record(spec, "job", who, key, ft.meta_of(body))
    return shown(submission.registry, [row])[0]


def listed(
    jobs: JobStore, registry: Registry, who: Principal, after: str | None, limit: int
) -> FineTuningJobList:
    """The caller's jobs, newest first; `after` is the last id of the previous page."""
    cursor = encode_cursor(owned(jobs, after, "job", who)) if after else None
    rows, more = listing(jobs, who, kind="job", limit=limit, cursor=cursor, cursor_field="after")
    return FineTuningJobList(data=shown(registry, rows), has_more=more is not None)


def get(jobs: JobStore, registry: Registry, job_id: str, who: Principal) -> FineTuningJob:
    return shown(registry, [owned(jobs, job_id, "job", who)])[0]


def cancel(canceller: Canceller, registry: Registry, job_id: str, who: Principal) -> FineTuningJob:
    """Cancel a queued or running job; a finished one is a 409."""
    done = cancel_job(canceller, owned(canceller.jobs, job_id, "job", who), who)
    return shown(registry, [done])[0]


def pause(jobs: JobStore, registry: Registry, job_id: str, who: Principal) -> FineTuningJob:
    """Pause: `pausing` until the run checkpoints at its next step, then `paused`; a queued
    job is `paused` at once; a finished one is a 409."""
    return shown(registry, [pausing.pause(jobs, job_id, who)])[0]


def resume(jobs: JobStore, registry: Registry, job_id: str, who: Principal) -> FineTuningJob:
    """Resume a paused job from its checkpoint (`queued` again)."""
    return shown(registry, [pausing.resume(jobs, job_id, who)])[0]


def events(
    jobs: JobStore,
    registry: Registry,
    job_id: str,
    who: Principal,
    after: str | None,
    limit: int,
) -> EventList:
    """Status changes and every reported step's metrics, newest first."""
    row = owned(jobs, job_id, "job", who)
    model = ft.registered(registry.of_jobs([row.id])).get(row.id)
    items = ft.events(row, jobs.metrics(row.id), model, PauseStore(jobs.db).events(row.id))
    chunk, more = ft.page(items, after, limit, lambda e: e.id)
    return EventList(data=chunk, has_more=more)


def checkpoints(
    jobs: JobStore,
    registry: Registry,
    job_id: str,
    who: Principal,
    after: str | None,
    limit: int,
) -> CheckpointList:
    """The checkpoints the run saved, newest first, with their step metrics and, where
    registered, the model reference that serves them."""
    row = owned(jobs, job_id, "job", who)
    items = ft.checkpoints(row, jobs.metrics(row.id), registry.of_jobs([row.id]))
    chunk, more = ft.page(items, after, limit, lambda c: c.id)
    return CheckpointList(data=chunk, has_more=more)
