"""OpenAI-style fine-tuning as a view over the job records: a create becomes a `JobSpec`
(submitted through the same path as POST /v1/jobs), and a job row is shown as a
fine-tuning job, its copied metrics as events and its checkpoints as checkpoints.

No state of its own: what an OpenAI create says that the spec cannot hold (the model as
named, the suffix, the metadata) is kept in the job row's `meta`.
"""

from __future__ import annotations

import hashlib
import posixpath
import secrets
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from jobs.spec import BUNDLED_MODELS, JobSpec, TrainSpec
from service.errors import InvalidSpec, split_named
from service.fine_tuning.schemas import (
    Checkpoint,
    Event,
    FineTuningJob,
    FineTuningJobCreate,
    JobError,
    ShownHyperparameters,
    ShownMethod,
    ShownSupervised,
)
from service.store import JobRow
from service.store.pauses import EventRow
from service.store.schema import ModelVersionRow

DEFAULTS = TrainSpec()  # what "auto" means, and the learning rate a multiplier scales
MAX_EVAL = 64  # rows held out of the training file when no validation file is given
STATUS = {"queued": "queued", "submitted": "queued", "running": "running"}
# Where a problem of the built spec came from in the OpenAI request.
REQUEST_FIELD = {
    "model": "model",
    "data": "training_file",
    "train": "hyperparameters",
    "loss": "numeric_loss",
}
T = TypeVar("T", bound=BaseModel)


def model_source(model: str) -> str:
    """numtune's source for an OpenAI `model`: sources as they are, a bundled model by its
    bare name, anything else as a registry reference (name:version, name@alias)."""
    if model.partition(":")[0] in ("bundled", "random", "registry"):
        return model
    return f"bundled:{model}" if model in BUNDLED_MODELS else f"registry:{model}"


def job_name(suffix: str | None, owner: str, key: str | None) -> str:
    """A fresh name, or one derived from the Idempotency-Key so that a retry is the same body."""
    tag = (
        hashlib.sha256(f"{owner}\0{key}".encode()).hexdigest()[:8] if key else secrets.token_hex(4)
    )
    return f"ft-{suffix}-{tag}" if suffix else f"ft-{tag}"


def to_spec(body: FineTuningJobCreate, name: str, rows: int, eval_rows: int | None) -> JobSpec:
    """The job a create asks for; InvalidSpec naming the request's field otherwise."""
    chosen = body.chosen
    seed = body.seed or 0
    train: dict[str, Any] = {"seed": seed}
    if chosen.n_epochs != "auto":
        train["epochs"] = chosen.n_epochs
    if chosen.batch_size != "auto":
        train["batch_size"] = chosen.batch_size
    if chosen.learning_rate_multiplier != "auto":
        train["lr"] = DEFAULTS.lr * chosen.learning_rate_multiplier
    held = eval_rows if eval_rows is not None else max(1, min(MAX_EVAL, rows // 10))
    if eval_rows is None and rows < 2:
        message = "needs 2 rows or more to hold one out; or give a validation_file"
        raise InvalidSpec([{"field": "training_file", "message": message}])
    data = {
        "task": "jsonl",
        "file": body.training_file,
        "eval_file": body.validation_file,
        "train_size": min(rows, 1_000_000),
        "eval_size": min(held, 100_000),
        "seed": seed,
    }
    spec = {
        "name": name,
        "register_as": name,
        "model": {"source": model_source(body.model)},
        "data": data,
        "loss": body.numeric_loss,  # validated with the body: taken as it is
        "train": train,
    }
    try:
        built = JobSpec.model_validate(spec)
    except ValidationError as error:
        problems = []
        for e in error.errors():
            top = str(e["loc"][0])
            loc, message = [REQUEST_FIELD.get(top, top)], e["msg"].removeprefix("Value error, ")
            if top == "loss":  # numeric_loss's fields are the loss's: "name: …" → its name
                loc, message = split_named(loc, message)
            problems.append({"field": ".".join(loc), "message": message})
        raise InvalidSpec(problems) from error
    _one_batch_each(built, rows if eval_rows is not None else rows - held)
    return built


def _one_batch_each(spec: JobSpec, training_rows: int) -> None:
    """The job's smallest worker shard must hold one batch, or its worker fails at start."""
    workers, batch = spec.scaling.num_workers, spec.train.batch_size
    if min(training_rows, spec.data.train_size) // workers < batch:
        message = (
            f"{training_rows} training rows (after the rows held out for evaluation) are "
            f"fewer than one batch of {batch}"
            + (f" for each of {workers} workers" if workers > 1 else "")
            + "; upload more rows, or choose a smaller batch_size"
        )
        raise InvalidSpec([{"field": "training_file", "message": message}])


def meta_of(body: FineTuningJobCreate) -> dict[str, Any]:
    """What the create said that the spec does not hold (the job row's `meta`): the model
    as named, the suffix, the metadata, and the learning-rate multiplier as asked (1 for
    "auto": the default learning rate)."""
    multiplier = body.chosen.learning_rate_multiplier
    return {
        "model": body.model,
        "suffix": body.suffix,
        "metadata": body.metadata,
        "learning_rate_multiplier": 1.0 if multiplier == "auto" else multiplier,
    }


def _multiplier(meta: dict[str, Any], lr: float) -> float:
    """The learning-rate multiplier a create asked for; for a job posted to /v1/jobs (or
    created before it was recorded), its learning rate as a multiple of the default."""
    asked = meta.get("learning_rate_multiplier")
    return float(asked) if asked is not None else round(lr / DEFAULTS.lr, 9)


def _unix(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp())


def _plain(location: str) -> str:
    """A checkpoint's path without scheme or options, to compare a URI with a path."""
    return posixpath.normpath("/" + location.partition("?")[0].split("://", 1)[-1].lstrip("/"))


def registered(versions: Iterable[ModelVersionRow]) -> dict[str, str]:
    """{job id: the reference of its first registered version}."""
    refs: dict[str, str] = {}
    for v in versions:
        refs.setdefault(v.job_id, f"{v.name}:{v.version}")
    return refs


def _status(row: JobRow) -> tuple[str, JobError | None]:
    """The OpenAI status and error. An OpenAI client polls until `succeeded` and then reads
    `fine_tuned_model`: a job whose training succeeded is `running` while its registration
    is pending or retried, and `failed` (with an error naming it) once registration has
    failed for good; otherwise a client would poll a `succeeded` job with no model forever."""
    if row.status == "failed":
        return "failed", JobError(code=row.reason or "failed", message=row.detail or "")
    if row.status == "succeeded" and row.registration_state == "pending":
        return "running", None
    if row.status == "succeeded" and row.registration_state == "failed":
        message = (
            "training succeeded but its model could not be registered: "
            f"{row.registration_error or 'unknown error'}"
        )
        return "failed", JobError(code="registration_failed", message=message)
    if row.status in ("submitted", "running") and row.pause_requested_at is not None:
        return "pausing", None
    return STATUS.get(row.status, row.status), None


def view(row: JobRow, fine_tuned_model: str | None) -> FineTuningJob:
    spec, meta = row.job_spec, row.meta or {}
    train = spec.train
    epochs = train.epochs
    hyper = ShownHyperparameters(
        n_epochs=int(epochs) if epochs and float(epochs).is_integer() else "auto",
        batch_size=train.batch_size,
        learning_rate_multiplier=_multiplier(meta, train.lr),
    )
    status, error = _status(row)
    return FineTuningJob(
        id=row.id,
        created_at=int(row.created_at.timestamp()),
        finished_at=_unix(row.finished_at) if status != "running" else None,
        model=meta.get("model") or spec.model.source,
        fine_tuned_model=fine_tuned_model,
        organization_id=row.owner,
        status=status,
        hyperparameters=hyper,
        training_file=spec.data.file,
        validation_file=spec.data.eval_file,
        error=error,
        seed=train.seed,
        metadata=meta.get("metadata"),
        method=ShownMethod(supervised=ShownSupervised(hyperparameters=hyper)),
        user_provided_suffix=meta.get("suffix"),
        numeric_loss=spec.loss.model_dump(mode="json"),
    )


def _numbers(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _event(row: JobRow, tag: str, when: datetime | None, message: str, **more: Any) -> Event:
    at = when or row.started_at or row.created_at
    fields = {"level": "info", "type": "message", **more}
    return Event(id=f"{row.id}:{tag}", created_at=int(at.timestamp()), message=message, **fields)


def _said(event: EventRow) -> str:
    what = {
        "pause_requested": "Pause requested",
        "paused": "Paused",
        "resumed": "Resumed",
        "preempted": "Preempted",  # asked to pause for a higher-priority job
        "preempting": "Preempting",  # lower-priority jobs asked to pause for this one
    }
    return f"{what.get(event.kind, event.kind)} by {event.by}: {event.detail or ''}".rstrip(": ")


def events(
    row: JobRow, metrics: list[dict[str, Any]], model: str | None, pauses: Sequence[EventRow] = ()
) -> list[Event]:
    """Status changes and per-step metrics, newest first. Ids name what happened (not a
    position), so `after` pages stay put while new events arrive. Metrics rows carry no
    time of their own: they are dated at the run's start."""
    out = [_event(row, "created", row.created_at, "Job created")]
    out += _requeued(row)
    if row.submitted_at:
        out.append(_event(row, "submitted", row.submitted_at, "Submitted to Ray"))
    if row.started_at:
        out.append(_event(row, "started", row.started_at, "Fine-tuning started"))
    for seq, m in enumerate(metrics):
        shown = ", ".join(f"{k}={v:.4g}" for k, v in _numbers(m).items() if k != "step")
        text = f"Step {m.get('step')}: {shown}"
        out.append(_event(row, f"step-{seq}", None, text, type="metrics", data=m))
    # Pauses and resumes (after the steps they interrupted), with who asked.
    out += [_event(row, f"{e.kind}-{e.id}", e.at, _said(e)) for e in pauses]
    if row.finished_at:
        why = f"{row.reason or ''} {row.detail or ''}".strip()
        text = "The job has successfully completed" if row.status == "succeeded" else why
        level = "error" if row.status == "failed" else "info"
        out.append(_event(row, row.status, row.finished_at, text or row.status, level=level))
    out += _registration(row, model)
    return out[::-1]


def _requeued(row: JobRow) -> list[Event]:
    """Its latest return to the queue (service/jobs/requeueing.py says when one happens)."""
    if not row.start_retries or row.requeued_at is None:
        return []
    text = (
        f"Back in the queue (retry {row.start_retries}): its workers did not start before "
        "step 1, or Ray lost it with its head; the job's log says which"
    )
    data = {"start_retries": row.start_retries}
    return [
        _event(row, f"requeued-{row.start_retries}", row.requeued_at, text, level="warn", data=data)
    ]


def _registration(row: JobRow, model: str | None) -> list[Event]:
    """Registration as a model version: done, failed for good, or failed and retried."""
    data = {"registration": row.registration_state, "attempts": row.registration_attempts}
    if model:
        return [_event(row, "registered", row.finished_at, f"Registered as {model}", data=data)]
    if row.registration_state == "failed":
        text = f"Registration failed: {row.registration_error}"
        tag = "registration-failed"
        return [_event(row, tag, row.updated_at, text, level="error", data=data)]
    if row.registration_state == "pending" and row.registration_attempts:
        text = (
            f"Registration attempt {row.registration_attempts} failed "
            f"({row.registration_error}); retrying"
        )
        tag = f"registration-{row.registration_attempts}"
        return [_event(row, tag, row.updated_at, text, level="warn", data=data)]
    return []


def checkpoints(
    row: JobRow, metrics: list[dict[str, Any]], versions: list[ModelVersionRow]
) -> list[Checkpoint]:
    """The checkpoints the run reported, newest first, each with its registry reference
    where it was registered."""
    refs = {_plain(v.source): f"{v.name}:{v.version}" for v in versions}
    when = _unix(row.started_at) or int(row.created_at.timestamp())
    out = [
        Checkpoint(
            id=f"{row.id}:checkpoint-{m['step']}",
            created_at=when,
            fine_tuning_job_id=row.id,
            step_number=m["step"],
            metrics={**_numbers(m), "train_loss": m.get("loss")},
            fine_tuned_model_checkpoint=refs.get(_plain(m["checkpoint"])),
            checkpoint=m["checkpoint"],
        )
        for m in metrics
        if m.get("checkpoint")
    ]
    return out[::-1]


def page(items: list[T], after: str | None, limit: int, id_of: Any) -> tuple[list[T], bool]:
    """OpenAI's cursor pages: the items after the one with id `after`, `limit` of them."""
    ids = [id_of(item) for item in items]
    start = ids.index(after) + 1 if after in ids else 0
    chunk = items[start : start + limit]
    return chunk, start + limit < len(items)
