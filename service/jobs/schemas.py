"""The bodies of /v1/jobs and /v1/tokens that `jobs.spec` does not define: every job and
token response, and the token-create request (a posted job or sweep is a `jobs.spec`
model itself)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.jobs.states import JobStatus
from service.store import JobRow, Scope, TokenRow


class RegistrationOut(BaseModel):
    """A succeeded job's registration as a model version: a retried step of its own."""

    status: Literal["pending", "done", "failed"]
    attempts: int
    model: str | None = Field(None, description="the version it became (name:version)")
    error: str | None = Field(None, description="the last attempt's error")
    next_attempt_at: datetime | None = None


class JobOut(BaseModel):
    id: str
    kind: Literal["job", "tune"]
    name: str
    owner: str
    status: JobStatus
    reason: str | None = Field(None, description="failure reason code when failed/cancelled")
    detail: str | None = None
    ray_status: str | None = None
    ray_message: str | None = None
    created_at: datetime
    updated_at: datetime
    submitted_at: datetime | None = Field(None, description="when it was last handed to Ray")
    started_at: datetime | None = None
    finished_at: datetime | None = None
    best_checkpoint: str | None = None
    metrics_count: int
    queue_position: int | None = Field(
        None, description="while queued: its place in the admission order (1 = next)"
    )
    waiting_for: str | None = Field(None, description="while queued: what it waits for")
    start_retries: int = Field(
        0,
        description="times it went back to the queue: its workers did not start before "
        "step 1, or Ray lost it with its head (a job then goes on from its latest checkpoint)",
    )
    pause_requested_at: datetime | None = Field(
        None, description="a pause asked for: the run stops at its next step boundary"
    )
    paused_checkpoint: str | None = Field(
        None, description="the checkpoint a paused job resumes from"
    )
    resumes: int = Field(0, description="times it was resumed after a pause")
    registration: RegistrationOut | None = None
    final_metrics: dict[str, Any] | None = None
    spec: dict[str, Any]

    @classmethod
    def of(cls, row: JobRow) -> JobOut:
        shown = {name: getattr(row, name) for name in _FROM_ROW}
        out = cls.model_validate({**shown, "spec": row.spec_json})  # the spec as stored
        if row.result:
            out.final_metrics = row.result.get("metrics") or None
        if row.registration_state:
            out.registration = RegistrationOut(
                status=row.registration_state,
                attempts=row.registration_attempts,
                model=row.registered_model,
                error=row.registration_error,
                next_attempt_at=row.registration_next_at,
            )
        return out


# JobOut's fields read from the row as they are (the spec is shown as stored).
_FROM_ROW = [
    name for name in JobOut.model_fields if name not in ("registration", "final_metrics", "spec")
]


class JobEventOut(BaseModel):
    """A pause asked for, a pause done (with its checkpoint), a resume: who and when."""

    model_config = ConfigDict(from_attributes=True)

    at: datetime
    kind: Literal["pause_requested", "paused", "resumed", "preempted", "preempting"]
    by: str = Field(description="the owner who asked, or numtune")
    detail: str | None = None


class JobEventsOut(BaseModel):
    id: str
    items: list[JobEventOut]


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None = None


class MetricsOut(BaseModel):
    id: str
    items: list[dict[str, Any]]


class TrialsOut(BaseModel):
    id: str
    items: list[dict[str, Any]]


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    owner: str = Field(..., pattern=r"^[a-z0-9][a-z0-9._-]{0,62}$")
    scopes: list[Scope] = Field(..., min_length=1)
    name: str = Field("", max_length=63)


class TokenOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    owner: str
    name: str
    scopes: str
    created_at: datetime
    revoked_at: datetime | None = None

    @classmethod
    def of(cls, row: TokenRow) -> TokenOut:
        return cls.model_validate(row)


class TokenCreated(TokenOut):
    token: str = Field(..., description="the secret; shown only once")
