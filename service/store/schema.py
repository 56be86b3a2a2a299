"""Tables of the control plane (SQLAlchemy 2). Migrations in `migrations/` create them.

One `jobs` table holds training jobs and tune sweeps (`kind`): they share the state
machine, the reconciler and the API. Metrics and logs are copied in as the job runs,
so they outlive the Ray head. Timestamps are UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from jobs.spec import JobSpec, StudySpec, TuneSpec

M = TypeVar("M", bound=BaseModel)
_TYPED = "_typed_spec"  # where a row keeps its parsed spec (not a column)
# What a job row is made from: a typed spec (dumped once, and kept), or JSON as stored.
SpecIn = JobSpec | TuneSpec | dict[str, Any]


class UnreadableSpecError(ValueError):
    """A stored spec that no longer validates as its row's kind of spec (a row written by
    hand, or by a numtune whose specs said otherwise): nothing can run it."""


def _typed(row: Any, model: type[M], stored: dict[str, Any], label: str) -> M:
    """`stored` (the row's spec JSON) as `model`, parsed on first use, then kept with the row."""
    found = row.__dict__.get(_TYPED)
    if found is None:
        try:
            found = model.model_validate(stored)
        except ValidationError as error:
            raise UnreadableSpecError(
                f"{label}: its stored spec is not a valid {model.__name__}: {error}"
            ) from error
        row.__dict__[_TYPED] = found
    assert isinstance(found, model)
    return found


def _keep(row: Any, spec: BaseModel) -> None:
    """Keep the spec a row was just made from: its JSON is that spec's dump."""
    row.__dict__[_TYPED] = spec


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is stored as UTC and always read back timezone-aware.

    SQLite has no timezone type: `DateTime(timezone=True)` reads back naive there, and
    the API would then send "2026-01-01T10:00:00" (no offset, not an RFC 3339 date-time)
    for stored rows but "...+00:00" for a row it just created."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    pass


class TokenRow(Base):
    __tablename__ = "tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str] = mapped_column(String(63), index=True)
    name: Mapped[str] = mapped_column(String(63))
    scopes: Mapped[str] = mapped_column(String(64))  # space-separated: read submit admin
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class JobRow(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("owner", "idempotency_key", name="uq_jobs_owner_idempotency"),
        Index("ix_jobs_owner_kind_created", "owner", "kind", "created_at"),
        Index("ix_jobs_status", "status"),
        Index("ix_jobs_registration", "registration_state"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    kind: Mapped[str] = mapped_column(String(8))  # job | tune
    name: Mapped[str] = mapped_column(String(63))
    owner: Mapped[str] = mapped_column(String(63))
    # The spec as stored (JSON, what Ray is handed); read it typed as `spec`.
    spec_json: Mapped[dict] = mapped_column("spec", JSON)
    spec_sha256: Mapped[str] = mapped_column(String(64))
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(String(32))
    detail: Mapped[str | None] = mapped_column(Text)
    ray_status: Mapped[str | None] = mapped_column(String(16))
    ray_message: Mapped[str | None] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Since when Ray has not answered about this job (None while it answers).
    unreachable_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    best_checkpoint: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict | None] = mapped_column(JSON)
    trials: Mapped[list | None] = mapped_column(JSON)  # tunes: the trials table
    metrics_count: Mapped[int] = mapped_column(Integer, default=0)
    log_chars: Mapped[int] = mapped_column(BigInteger, default=0)
    # While queued: the place in the admission order (1 = next) and what it waits for.
    queue_position: Mapped[int | None] = mapped_column(Integer)
    waiting_for: Mapped[str | None] = mapped_column(Text)
    submitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # handed to Ray
    # Submissions that failed on our side (e.g. storage full); the job fails after a few.
    submit_attempts: Mapped[int] = mapped_column(Integer, default=0)
    # What an OpenAI-style create said that the spec does not hold: the model as named,
    # suffix, hyperparameters as given ("auto"), the caller's metadata. For a job a study took
    # over from kept work: `kept_from`, the job that trained it on another service.
    meta: Mapped[dict | None] = mapped_column(JSON)
    # Times its workers did not start before step 1 and it went back to the queue.
    start_retries: Mapped[int] = mapped_column(Integer, default=0)
    requeued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The registration outbox: its state "pending" is written with the succeeded state itself, then
    # "done" (registered_model says which version) or "failed" (registration_error says
    # why); None for a job with nothing to register.
    registration_state: Mapped[str | None] = mapped_column(String(16))
    registration_attempts: Mapped[int] = mapped_column(Integer, default=0)
    registration_next_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    registration_error: Mapped[str | None] = mapped_column(Text)
    registered_model: Mapped[str | None] = mapped_column(String(130))
    # Pause (service/jobs/pausing.py): asked for at (None: not asked, or done), the checkpoint a
    # paused job resumes from, and its resumes (each a new Ray submission).
    pause_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    paused_checkpoint: Mapped[str | None] = mapped_column(Text)
    resumes: Mapped[int] = mapped_column(Integer, default=0)
    # Usage across pauses (service/queue/usage.py): seconds run before the last resume; last pause.
    ran_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    ran_until: Mapped[datetime | None] = mapped_column(UTCDateTime)

    @property
    def ray_id(self) -> str:
        """Its Ray submission id: the job id, and a new one for each return to the queue or
        resume (Ray keeps a submission id for ever, and a resubmission must start afresh)."""
        retry = f"-r{self.start_retries}" if self.start_retries else ""
        return f"{self.id}{retry}-p{self.resumes}" if self.resumes else f"{self.id}{retry}"

    @classmethod
    def of_columns(cls, columns: Mapping[str, Any]) -> JobRow:
        """A row from a Core select of the table (its spec column is `spec_json` here)."""
        return cls(**{_ATTRIBUTES[name]: value for name, value in columns.items()})

    @property
    def spec(self) -> JobSpec | TuneSpec:
        """The spec of this row, typed by its kind: a TuneSpec for a tune, else a JobSpec
        (UnreadableSpecError if the stored JSON does not validate)."""
        if self.kind == "tune":
            return _typed(self, TuneSpec, self.spec_json, self.id)
        return _typed(self, JobSpec, self.spec_json, self.id)

    @property
    def job_spec(self) -> JobSpec:
        """The job this row trains: its spec, or a tune's base (what each trial varies)."""
        spec = self.spec
        return spec.base if isinstance(spec, TuneSpec) else spec

    def keep_spec(self, spec: JobSpec | TuneSpec) -> None:
        """Remember the typed spec this row's JSON was dumped from (no second parse)."""
        if isinstance(spec, TuneSpec) != (self.kind == "tune"):
            raise ValueError(f"a {type(spec).__name__} is not the spec of a {self.kind}")
        _keep(self, spec)


# The jobs table's attribute names by column name (its spec column is `spec_json` here).
_ATTRIBUTES = {column.name: key for key, column in JobRow.__mapper__.columns.items()}


class FileRow(Base):
    """An uploaded training file: validated whole before its row is written."""

    __tablename__ = "files"
    __table_args__ = (Index("ix_files_owner_created", "owner", "created_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner: Mapped[str] = mapped_column(String(63))
    filename: Mapped[str] = mapped_column(String(255))
    purpose: Mapped[str] = mapped_column(String(32))
    bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    rows: Mapped[int] = mapped_column(Integer)
    location: Mapped[str] = mapped_column(Text)  # a local path or a storage URI
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class MetricRow(Base):
    __tablename__ = "job_metrics"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    step: Mapped[int | None] = mapped_column(Integer)
    data: Mapped[dict] = mapped_column(JSON)


class LogChunkRow(Base):
    __tablename__ = "job_logs"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    text: Mapped[str] = mapped_column(Text)


class ModelRow(Base):
    __tablename__ = "models"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    owner: Mapped[str] = mapped_column(String(63), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Numbers are taken from here and never handed out twice, even after a delete.
    next_version: Mapped[int] = mapped_column(Integer, default=1)


class ModelVersionRow(Base):
    """Immutable once written: the artifact's files and their sha256, and its lineage."""

    __tablename__ = "model_versions"
    # Registering the same checkpoint twice (API and the reconciler's hook) is one version.
    __table_args__ = (UniqueConstraint("job_id", "source", name="uq_model_versions_job_source"),)

    name: Mapped[str] = mapped_column(
        ForeignKey("models.name", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(String(40))
    source: Mapped[str] = mapped_column(Text)  # the checkpoint it was copied from
    artifact: Mapped[str] = mapped_column(Text)  # folder below the storage root
    files: Mapped[dict] = mapped_column(JSON)  # relative path -> sha256
    spec: Mapped[dict] = mapped_column(JSON)  # the spec it was trained by, as recorded
    dataset: Mapped[dict] = mapped_column(JSON)
    metrics: Mapped[dict] = mapped_column(JSON)  # eval metrics only (migration 0009)
    # Read typed through service/registry/record.py ModelVersion: the interval calibration
    # (jobs/calibration/record.py, either layout) and the lineage ({"base": BaseReference}).
    calibration: Mapped[dict | None] = mapped_column(JSON)
    lineage: Mapped[dict | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class AliasRow(Base):
    __tablename__ = "model_aliases"
    # An alias can only point at a version that exists; deleting that version fails.
    __table_args__ = (
        ForeignKeyConstraint(
            ["name", "version"],
            ["model_versions.name", "model_versions.version"],
            name="fk_model_aliases_version",
        ),
    )

    name: Mapped[str] = mapped_column(
        ForeignKey("models.name", ondelete="CASCADE"), primary_key=True
    )
    alias: Mapped[str] = mapped_column(String(63), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class StudyRow(Base):
    """A study (jobs/spec/study.py): its spec, the jobs it expanded into, its result.

    `runs` lists every job and sweep it created as {"arm", "seed", "job_id", "kind"}; all
    its progress is read from those jobs' rows, so a restarted API goes on from here."""

    __tablename__ = "studies"
    __table_args__ = (
        UniqueConstraint("owner", "idempotency_key", name="uq_studies_owner_idempotency"),
        Index("ix_studies_owner_created", "owner", "created_at"),
        Index("ix_studies_status", "status"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(63))
    owner: Mapped[str] = mapped_column(String(63))
    # The StudySpec as stored, its base as confined at submit; read it typed as `spec`.
    spec_json: Mapped[dict] = mapped_column("spec", JSON)
    spec_sha256: Mapped[str] = mapped_column(String(64))
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))  # running | cancelling | succeeded | ...
    detail: Mapped[str | None] = mapped_column(Text)
    runs: Mapped[list] = mapped_column(JSON)
    result: Mapped[dict | None] = mapped_column(JSON)
    version: Mapped[int] = mapped_column(Integer, default=0)  # compare-and-set on every write
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    @property
    def spec(self) -> StudySpec:
        """The study's spec, typed (UnreadableSpecError if the stored JSON does not validate)."""
        return _typed(self, StudySpec, self.spec_json, self.id)

    def keep_spec(self, spec: StudySpec) -> None:
        """Remember the typed spec this row's JSON was dumped from (no second parse)."""
        _keep(self, spec)
