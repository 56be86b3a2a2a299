"""A training job, and reading one from a YAML or JSON file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Self

import yaml
from pydantic import Field, ValidationInfo, field_validator, model_validator

from jobs.spec.base import RANDOM_PRESETS, VISION_PRESETS, Strict
from jobs.spec.decoding import is_default
from jobs.spec.loss import LossSpec, check_digit_level
from jobs.spec.parts import (
    DataSpec,
    ModelSpec,
    ScalingSpec,
    TrainSpec,
)
from jobs.storage.uri import read_uri_text

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


def _slug(v: str | None) -> str | None:
    """Names become ids, paths and registry names: keep them to a safe alphabet."""
    if v is not None and not _NAME.match(v):
        raise ValueError("must be 1-63 of a-z 0-9 . _ - starting with a letter or digit")
    return v


class CalibrationSpec(Strict):
    """Interval calibration of the finished model on the job's held-out split, stored on the
    registered version (jobs/calibration/conformal.py); questions 0 turns it off."""

    questions: int = Field(200, ge=0, le=100_000)  # at most data.eval_size are held out
    samples: int = Field(16, ge=2, le=256)  # K: serving's default is 16
    max_new_tokens: int = Field(16, ge=1, le=512)  # serving's default


# Schemes an MLflow tracking URI may use: a server, or a local store on the machine.
TRACKING_SCHEMES = ("http://", "https://", "sqlite:///", "file:///")


class TrackingSpec(Strict):
    """Where the job is tracked besides its own records (jobs/tracking/job.py); nothing when unset.

    Through the REST API a user may name only an http(s) MLflow server: a local store is a
    file the job would create with the service's rights, so that is the operator's choice
    alone (NUMTUNE_MLFLOW_URI, which the service writes here when a spec leaves it unset)."""

    mlflow_uri: str | None = Field(None, min_length=1, max_length=2000)
    experiment: str = Field("numtune", min_length=1, max_length=200)
    # The job's owner as the service knows it, for the run's tags: set by the service at
    # submit (a value sent by the user is replaced); a job run by hand may name one.
    owner: str | None = Field(None, max_length=63)

    @field_validator("mlflow_uri")
    @classmethod
    def _scheme(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(TRACKING_SCHEMES):
            raise ValueError(f"must start with one of {', '.join(TRACKING_SCHEMES)}")
        return v


class JobSpec(Strict):
    """A training job: what the REST API takes and `python -m jobs run` runs."""

    name: str = Field(..., min_length=1, max_length=63)
    model: ModelSpec = ModelSpec()
    data: DataSpec = DataSpec()
    loss: LossSpec = LossSpec()
    train: TrainSpec = TrainSpec()
    scaling: ScalingSpec = ScalingSpec()
    max_failures: int = Field(0, ge=0, le=100)
    calibration: CalibrationSpec = CalibrationSpec()
    tracking: TrackingSpec = TrackingSpec()
    register_as: str | None = None  # registry model name; defaults to `name`
    # Wall-clock limit from the moment it runs; the service stops it then (reason timeout).
    timeout_s: float | None = Field(None, gt=0)
    # The queue's priority class (the admin names the classes and who may use which;
    # service/queue/priorities.py); None: the admin's default. The run itself never reads it.
    # Left out of dumps while None, so the specs (and digests) of runs planned before it
    # existed stay as they were.
    priority: str | None = Field(
        None, pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$", exclude_if=is_default(None)
    )

    _names = field_validator("name", "register_as")(_slug)

    @field_validator("loss")
    @classmethod
    def _loss_fits_tokenizer(cls, v: LossSpec, info: ValidationInfo) -> LossSpec:
        model = info.data.get("model")  # declared above: validated by now, if valid
        if isinstance(model, ModelSpec):
            check_digit_level(v, model.source)
        return v

    @model_validator(mode="after")
    def _deepspeed_bf16_needs_gpu(self) -> Self:
        if (
            self.scaling.deepspeed is not None
            and self.train.precision in ("bf16", "bf16_weights")
            and not (self.scaling.use_gpu)
        ):
            # (auto resolves to fp32 for DeepSpeed on CPU: jobs/train/worker.py)
            raise ValueError("train.precision: DeepSpeed bf16 needs GPUs; use fp32 on CPU")
        return self

    @model_validator(mode="after")
    def _images_need_vision(self) -> Self:
        kind, _, preset = self.model.source.partition(":")
        text_only = kind == "random" and preset in RANDOM_PRESETS and preset not in VISION_PRESETS
        if self.data.has_images and (text_only or kind == "bundled"):
            raise ValueError(
                f"model.source: task {self.data.task} asks about images; {self.model.source} is"
                f" a text-only model. Use random:{VISION_PRESETS[0]} or a vision-language folder"
            )
        return self


def load_spec_file(path: str | Path) -> dict[str, object]:
    """Read a YAML or JSON spec file into a dict (JSON is YAML); validation is the caller's."""
    if "://" in str(path):  # the control plane hands Ray jobs a storage URI
        text = read_uri_text(str(path))
    else:
        text = Path(path).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a spec file must hold a mapping at the top level")
    return data


def load_job_spec(path: str | Path) -> JobSpec:
    return JobSpec.model_validate(load_spec_file(path))
