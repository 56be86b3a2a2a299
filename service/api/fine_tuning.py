"""/v1/fine_tuning/jobs: OpenAI's fine-tuning API over numtune's jobs (service/fine_tuning.py
maps each way). A create is recorded through the same path as POST /v1/jobs, and any
training job can be read here."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from service import fine_tuning as ft
from service.api.deps import Reader, Services, ServicesDep, Submitter
from service.api.jobs import IdempotencyKey, cancel_row, owned, record
from service.errors import InvalidRequest, InvalidSpec
from service.fine_tuning_schemas import (
    CheckpointList,
    EventList,
    FineTuningJob,
    FineTuningJobCreate,
    FineTuningJobList,
)
from service.store import JobRow, Principal
from service.store.pages import encode_cursor

router = APIRouter(prefix="/v1/fine_tuning/jobs", tags=["fine_tuning"])
Limit = Annotated[int, Query(ge=1, le=200)]
After = Annotated[str | None, Query(max_length=200)]


def shown(services: Services, rows: list[JobRow]) -> list[FineTuningJob]:
    refs = ft.registered(services.registry.of_jobs([r.id for r in rows]))
    return [ft.view(r, refs.get(r.id)) for r in rows]


def rows_in(services: Services, file_id: str, field: str, who: Principal) -> int:
    """The row count of a file the body names; a 422 naming the field if there is none."""
    found = services.files.get(file_id, None if who.is_admin else who.owner)
    if found is None:
        raise InvalidSpec([{"field": field, "message": f"no file {file_id!r}"}])
    return found.rows


def job(services: Services, job_id: str, who: Principal) -> JobRow:
    return owned(services.jobs, job_id, "job", who)


@router.post("", response_model=FineTuningJob)
def create_job(
    body: FineTuningJobCreate, services: ServicesDep, who: Submitter, key: IdempotencyKey = None
) -> FineTuningJob:
    """Fine-tune `model` on an uploaded file with the numeric loss `numeric_loss`; the
    result is registered as the job's name and is `fine_tuned_model` once it succeeded."""
    rows = rows_in(services, body.training_file, "training_file", who)
    held = body.validation_file
    eval_rows = rows_in(services, held, "validation_file", who) if held else None
    name = ft.job_name(body.suffix, who.owner, key)
    spec = ft.to_spec(body, name, rows, eval_rows)
    row, _ = record(spec, "job", services, who, key, ft.meta_of(body))
    return shown(services, [row])[0]


@router.get("", response_model=FineTuningJobList)
def list_jobs(
    services: ServicesDep, who: Reader, after: After = None, limit: Limit = 20
) -> FineTuningJobList:
    """Your jobs, newest first; `after` is the last id of the previous page."""
    cursor = encode_cursor(job(services, after, who)) if after else None
    owner = None if who.is_admin else who.owner
    try:
        rows, more = services.jobs.page(kind="job", owner=owner, limit=limit, cursor=cursor)
    except ValueError as error:
        raise InvalidRequest([{"field": "after", "message": str(error)}]) from error
    return FineTuningJobList(data=shown(services, rows), has_more=more is not None)


@router.get("/{job_id}", response_model=FineTuningJob)
def get_job(job_id: str, services: ServicesDep, who: Reader) -> FineTuningJob:
    return shown(services, [job(services, job_id, who)])[0]


@router.post("/{job_id}/cancel", response_model=FineTuningJob)
def cancel_job(
    job_id: str, request: Request, services: ServicesDep, who: Submitter
) -> FineTuningJob:
    """Cancel a queued or running job; a finished one is a 409."""
    done = cancel_row(job(services, job_id, who), request, services, who)
    return shown(services, [done])[0]


@router.get("/{job_id}/events", response_model=EventList)
def list_events(
    job_id: str, services: ServicesDep, who: Reader, after: After = None, limit: Limit = 20
) -> EventList:
    """Status changes and every reported step's metrics (the loss and its parts), newest
    first."""
    row = job(services, job_id, who)
    model = ft.registered(services.registry.of_jobs([row.id])).get(row.id)
    items = ft.events(row, services.jobs.metrics(row.id), model)
    chunk, more = ft.page(items, after, limit, lambda e: e.id)
    return EventList(data=chunk, has_more=more)


@router.get("/{job_id}/checkpoints", response_model=CheckpointList)
def list_checkpoints(
    job_id: str, services: ServicesDep, who: Reader, after: After = None, limit: Limit = 10
) -> CheckpointList:
    """The checkpoints the run saved, newest first, with their step metrics and, where
    registered, the model reference that serves them."""
    row = job(services, job_id, who)
    items = ft.checkpoints(row, services.jobs.metrics(row.id), services.registry.of_jobs([row.id]))
    chunk, more = ft.page(items, after, limit, lambda c: c.id)
    return CheckpointList(data=chunk, has_more=more)
