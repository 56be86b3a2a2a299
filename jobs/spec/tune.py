"""Ray Tune sweeps: a base job, a search space over LossSpec fields, lr and a LoRA adapter's
rank and alpha, ASHA."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from jobs.spec.adapter import AdapterSpec
from jobs.spec.base import (
    METRIC_MODES,
    MetricMode,
    MetricName,
    Strict,
)
from jobs.spec.job import JobSpec, _slug, load_spec_file
from jobs.spec.loss import LossSpec
from jobs.spec.parts import TrainSpec

TRIAL_DRIVER_CPU = 0.01  # a trial's own process only waits on its TorchTrainer
# What a sweep may vary: any LossSpec field, the learning rate, and (for a base job with
# model.adapter) the adapter's rank and alpha; a sampled rank is rounded to an integer.
ADAPTER_TUNABLE = {"adapter.r": "r", "adapter.alpha": "alpha"}
TUNABLE = (*LossSpec.model_fields, "lr", *ADAPTER_TUNABLE)


class SearchDim(Strict):
    """One dimension of a search space; ranges and choices are checked against LossSpec."""

    kind: Literal["loguniform", "uniform", "choice", "grid"]
    low: float | None = None
    high: float | None = None
    values: tuple[float | str | None, ...] | None = None

    @model_validator(mode="after")
    def _shape(self) -> Self:
        if self.kind in ("loguniform", "uniform"):
            if self.low is None or self.high is None or self.values is not None:
                raise ValueError(f"{self.kind} takes low and high (and no values)")
            if not self.low < self.high:
                raise ValueError("low must be smaller than high")
            if self.kind == "loguniform" and self.low <= 0:
                raise ValueError("loguniform needs low > 0")
        elif not self.values or self.low is not None or self.high is not None:
            raise ValueError(f"{self.kind} takes a non-empty list of values (and no low/high)")
        return self

    def points(self) -> tuple[float | str | None, ...]:
        """The values that bound this dimension: every choice, or both ends of a range."""
        return self.values if self.values is not None else (self.low, self.high)


class ASHASpec(Strict):
    """Asynchronous successive halving on the reported `step`."""

    grace_period: int = Field(5, ge=1)
    reduction_factor: float = Field(2.0, gt=1)


class TuneSpec(Strict):
    """A sweep: a base job, a space over LossSpec fields (and lr), a search and a scheduler."""

    name: str = Field(..., min_length=1, max_length=63)
    base: JobSpec
    space: dict[str, SearchDim]
    num_samples: int = Field(4, ge=1, le=10_000)
    search: Literal["random", "grid", "optuna"] = "random"
    asha: ASHASpec | None = ASHASpec()
    metric: MetricName = "exact_match"
    max_concurrent_trials: int | None = Field(None, ge=1)
    max_failures: int = Field(1, ge=0, le=100)  # per trial, on top of the base's Train retries
    timeout_s: float | None = Field(None, gt=0)  # the whole sweep's wall-clock limit

    _name = field_validator("name")(_slug)

    @field_validator("space")
    @classmethod
    def _space_fields(cls, v: dict[str, SearchDim]) -> dict[str, SearchDim]:
        if not v:
            raise ValueError("the search space is empty")
        for key, dim in v.items():
            if key not in TUNABLE:
                raise ValueError(f"{key!r} cannot be tuned; tunable: {', '.join(TUNABLE)}")
            for point in dim.points():
                # Every bound and choice must itself be a valid spec value.
                if key == "lr":
                    TrainSpec(lr=point)
                elif key in ADAPTER_TUNABLE:
                    AdapterSpec.model_validate({ADAPTER_TUNABLE[key]: _adapter_value(key, point)})
                else:
                    LossSpec.model_validate({key: point})
        return v

    @model_validator(mode="after")
    def _search_fits(self) -> Self:
        kinds = {d.kind for d in self.space.values()}
        if self.search == "grid" and kinds - {"grid", "choice"}:
            raise ValueError("search: grid search takes only grid or choice dimensions")
        if self.search == "optuna" and "grid" in kinds:
            raise ValueError("search: optuna cannot sample grid dimensions; use choice")
        if self.asha is not None and self.base.train.eval_every is None:
            raise ValueError("base.train.eval_every: ASHA compares trials at evaluations; set it")
        if set(self.space) & set(ADAPTER_TUNABLE) and self.base.model.adapter is None:
            raise ValueError("space: adapter.r and adapter.alpha need base.model.adapter")
        if self.base.timeout_s is not None:
            raise ValueError("base.timeout_s: a sweep's wall-clock limit is its own timeout_s")
        return self

    @property
    def metric_key(self) -> str:
        return f"eval_{self.metric}"

    @property
    def total_trials(self) -> int:
        """Trials a whole sweep runs: num_samples of every point of the grid dimensions."""
        return self.num_samples * math.prod(
            len(d.points()) for d in self.space.values() if d.kind == "grid"
        )

    @property
    def trial_reserved(self) -> tuple[float, float]:
        """(CPUs, GPUs) one trial holds while it runs: its driver plus its Train workers."""
        cpus, gpus = self.base.scaling.reserved
        return TRIAL_DRIVER_CPU + cpus, gpus

    @property
    def metric_mode(self) -> MetricMode:
        return METRIC_MODES[self.metric]

    def trial_spec(self, config: dict[str, object]) -> JobSpec:
        """The base job with one trial's sampled values put in place."""
        loss = {k: v for k, v in config.items() if k != "lr" and k not in ADAPTER_TUNABLE}
        data = self.base.model_dump()
        data["loss"] = {**data["loss"], **loss}
        adapter = {
            ADAPTER_TUNABLE[k]: _adapter_value(k, v)
            for k, v in config.items()
            if k in ADAPTER_TUNABLE
        }
        if adapter:
            model = data["model"]
            data["model"] = {**model, "adapter": {**model["adapter"], **adapter}}
        if "lr" in config:
            data["train"] = {**data["train"], "lr": config["lr"]}
        return JobSpec.model_validate(data)


def _adapter_value(key: str, value: object) -> object:
    """A rank from a range (or a choice read as a float) is a float: the nearest integer."""
    if key == "adapter.r" and isinstance(value, float):
        return round(value)
    return value


def load_tune_spec(path: str | Path) -> TuneSpec:
    return TuneSpec.model_validate(load_spec_file(path))
