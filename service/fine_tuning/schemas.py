"""The bodies of /v1/fine_tuning/jobs in OpenAI's shapes (its client parses them), plus
numtune's extension: the numeric loss (`numeric_loss`, a `jobs.spec.LossSpec`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from jobs.spec import FILE_ID, LossSpec
from service.files.schemas import ListPage

Auto = Literal["auto"]


class ShownHyperparameters(BaseModel):
    """A job's hyperparameters as recorded: a job posted to /v1/jobs may use values past a
    create's limits (lr 0.5 is a 5,000× multiplier), and a view shows them as they are."""

    n_epochs: int | Auto = "auto"
    batch_size: int | Auto = "auto"
    learning_rate_multiplier: float | Auto = "auto"


class Hyperparameters(ShownHyperparameters):
    """ "auto" keeps numtune's default: 100 optimizer steps, batch 8, learning rate 1e-4."""

    model_config = ConfigDict(extra="forbid")

    n_epochs: Annotated[int, Field(ge=1, le=100)] | Auto = "auto"
    batch_size: Annotated[int, Field(ge=1, le=4096)] | Auto = "auto"
    learning_rate_multiplier: Annotated[float, Field(gt=0, le=1000)] | Auto = "auto"


class ShownSupervised(BaseModel):
    hyperparameters: ShownHyperparameters = ShownHyperparameters()


class Supervised(ShownSupervised):
    model_config = ConfigDict(extra="forbid")

    hyperparameters: Hyperparameters = Hyperparameters()


class ShownMethod(BaseModel):
    type: Literal["supervised"] = Field(
        "supervised", description="only supervised fine-tuning (with a numeric loss)"
    )
    supervised: ShownSupervised = ShownSupervised()


class Method(ShownMethod):
    model_config = ConfigDict(extra="forbid")

    supervised: Supervised = Supervised()


class FineTuningJobCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(
        ...,
        min_length=1,
        max_length=200,
        description="bundled:<name> (or just the name), random:<preset>, or a registered "
        "model: name:version, name@alias (or registry:...)",
    )
    training_file: str = Field(..., pattern=FILE_ID)
    validation_file: str | None = Field(None, pattern=FILE_ID)
    hyperparameters: Hyperparameters | None = None
    method: Method | None = None
    suffix: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9-]{0,39}$")
    seed: int | None = Field(None, ge=0, le=2**31 - 1)
    metadata: (
        dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]] | None
    ) = Field(None, max_length=16)
    numeric_loss: LossSpec = Field(
        LossSpec(),
        description="numtune's extension (openai client: extra_body={'numeric_loss': {...}})",
    )

    @model_validator(mode="after")
    def _one_set_of_hyperparameters(self) -> Self:
        if self.hyperparameters is not None and self.method is not None:
            raise ValueError(
                "hyperparameters: give hyperparameters or method.supervised.hyperparameters, "
                "not both"
            )
        return self

    @property
    def chosen(self) -> Hyperparameters:
        if self.method is not None:
            return self.method.supervised.hyperparameters
        return self.hyperparameters or Hyperparameters()


class JobError(BaseModel):
    code: str
    message: str
    param: str | None = None


class FineTuningJob(BaseModel):
    id: str
    object: Literal["fine_tuning.job"] = "fine_tuning.job"
    created_at: int
    finished_at: int | None
    model: str
    fine_tuned_model: str | None = Field(
        ..., description="the registry reference it was registered as (name:version)"
    )
    organization_id: str = Field(..., description="the owner")
    # pausing: asked to pause, it checkpoints at its next step; paused: holds nothing until resumed
    status: Literal[
        "validating_files",
        "queued",
        "running",
        "pausing",
        "paused",
        "succeeded",
        "failed",
        "cancelled",
    ]
    hyperparameters: ShownHyperparameters
    training_file: str | None
    validation_file: str | None
    result_files: list[str] = []
    trained_tokens: int | None = None
    error: JobError | None
    seed: int
    metadata: dict[str, str] | None
    method: ShownMethod
    user_provided_suffix: str | None
    numeric_loss: dict[str, Any]


FineTuningJobList = ListPage[FineTuningJob]


class Event(BaseModel):
    id: str
    object: Literal["fine_tuning.job.event"] = "fine_tuning.job.event"
    created_at: int
    level: Literal["info", "warn", "error"]
    message: str
    type: Literal["message", "metrics"]
    data: dict[str, Any] | None = None


EventList = ListPage[Event]


class Checkpoint(BaseModel):
    id: str
    object: Literal["fine_tuning.job.checkpoint"] = "fine_tuning.job.checkpoint"
    created_at: int
    fine_tuning_job_id: str
    step_number: int
    metrics: dict[str, Any]
    fine_tuned_model_checkpoint: str | None = Field(
        ...,
        description="its registry reference once registered (the job's best is, on success); "
        "null for one that was not",
    )
    checkpoint: str = Field(
        ..., description="where it was saved; POST /v1/models/{name}/versions registers it"
    )


CheckpointList = ListPage[Checkpoint]
