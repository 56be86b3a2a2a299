"""/v1/fine_tuning/jobs: OpenAI's fine-tuning API over numtune's jobs. Wiring only: the use
cases are `service/fine_tuning/use_cases.py` (a create is recorded through the same submission
as POST /v1/jobs, and any training job can be read here)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from service.auth.callers import IdempotencyKey, Reader, Submitter
from service.deps import CancelDep, JobsDep, RegistryDep, SubmissionDep
from service.fine_tuning import use_cases as ops
from service.fine_tuning.schemas import (
    CheckpointList,
    EventList,
    FineTuningJob,
    FineTuningJobCreate,
    FineTuningJobList,
)

router = APIRouter(prefix="/v1/fine_tuning/jobs", tags=["fine_tuning"])
Limit = Annotated[int, Query(ge=1, le=200)]
After = Annotated[str | None, Query(max_length=200)]


@router.post("", response_model=FineTuningJob)
def create_job(
    body: FineTuningJobCreate,
    submission: SubmissionDep,
    who: Submitter,
    key: IdempotencyKey = None,
) -> FineTuningJob:
    """Fine-tune `model` on an uploaded file with the numeric loss `numeric_loss`; the
    result is registered as the job's name and is `fine_tuned_model` once it succeeded."""
    return ops.create(submission, body, who, key)


@router.get("", response_model=FineTuningJobList)
def list_jobs(
    jobs: JobsDep, registry: RegistryDep, who: Reader, after: After = None, limit: Limit = 20
) -> FineTuningJobList:
    """Your jobs, newest first; `after` is the last id of the previous page."""
    return ops.listed(jobs, registry, who, after, limit)


@router.get("/{job_id}", response_model=FineTuningJob)
def get_job(job_id: str, jobs: JobsDep, registry: RegistryDep, who: Reader) -> FineTuningJob:
    return ops.get(jobs, registry, job_id, who)


@router.post("/{job_id}/cancel", response_model=FineTuningJob)
def cancel_job(
    job_id: str, canceller: CancelDep, registry: RegistryDep, who: Submitter
) -> FineTuningJob:
    """Cancel a queued or running job; a finished one is a 409."""
    return ops.cancel(canceller, registry, job_id, who)


@router.post("/{job_id}/pause", response_model=FineTuningJob)
def pause_job(job_id: str, jobs: JobsDep, registry: RegistryDep, who: Submitter) -> FineTuningJob:
    """Pause: the run checkpoints at its next step and gives back its resources
    (`pausing`, then `paused`); a queued job is held; a finished one is a 409."""
    return ops.pause(jobs, registry, job_id, who)


@router.post("/{job_id}/resume", response_model=FineTuningJob)
def resume_job(job_id: str, jobs: JobsDep, registry: RegistryDep, who: Submitter) -> FineTuningJob:
    """Resume a paused job: queued again, it continues from its checkpoint."""
    return ops.resume(jobs, registry, job_id, who)


@router.get("/{job_id}/events", response_model=EventList)
def list_events(
    job_id: str,
    jobs: JobsDep,
    registry: RegistryDep,
    who: Reader,
    after: After = None,
    limit: Limit = 20,
) -> EventList:
    """Status changes and every reported step's metrics (the loss and its parts), newest
    first."""
    return ops.events(jobs, registry, job_id, who, after, limit)


@router.get("/{job_id}/checkpoints", response_model=CheckpointList)
def list_checkpoints(
    job_id: str,
    jobs: JobsDep,
    registry: RegistryDep,
    who: Reader,
    after: After = None,
    limit: Limit = 10,
) -> CheckpointList:
    """The checkpoints the run saved, newest first, with their step metrics and, where
    registered, the model reference that serves them."""
    return ops.checkpoints(jobs, registry, job_id, who, after, limit)
