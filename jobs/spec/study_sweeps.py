"""The parts of a study that say how its sweeps run: a tuned arm (`{"tuned": "<loss>"}`),
ce's learning-rate sweep (`tune_lr`) and the settings every sweep of a study shares
(`sweeps`). `StudySpec` (study.py) builds the sweeps' `TuneSpec`s from them.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from jobs.spec.base import Strict
from jobs.spec.loss import LossName, LossSpec
from jobs.spec.tune import ASHASpec, SearchDim

BASELINE = "ce"
# What a tuned arm's sweep searches when the arm names no space: λ, and the kernel's
# bandwidth for the kernel losses (log scales: both act multiplicatively).
KERNEL_LOSSES = ("mmd", "smmd")
DEFAULT_WEIGHT = SearchDim(kind="loguniform", low=0.05, high=3.0)
DEFAULT_BANDWIDTH = SearchDim(kind="loguniform", low=0.3, high=5.0)
DEFAULT_SAMPLES = 4  # trials of a sweep that names none


class TunedArm(Strict):
    """`{"tuned": "<loss>"}`: that loss with its knobs chosen by a sweep before evaluation."""

    tuned: LossName
    num_samples: int = Field(DEFAULT_SAMPLES, ge=1, le=64)
    space: dict[str, SearchDim] | None = None  # default: weight (and bandwidth for mmd/smmd)

    @field_validator("tuned")
    @classmethod
    def _not_ce(cls, v: LossName) -> LossName:
        if v == BASELINE:
            raise ValueError("ce has nothing to tune; it is the baseline every study runs")
        return v

    @field_validator("space")
    @classmethod
    def _loss_fields(cls, v: dict[str, SearchDim] | None) -> dict[str, SearchDim] | None:
        # The evaluation runs take the sweep's best values as their loss: only loss knobs.
        bad = sorted(set(v or {}) - set(LossSpec.model_fields) - {"name"})
        if bad or (v is not None and "name" in v):
            raise ValueError(f"a tuned arm searches loss fields only, not {bad or ['name']}")
        return v

    def search_space(self) -> dict[str, SearchDim]:
        if self.space is not None:
            return self.space
        space = {"weight": DEFAULT_WEIGHT}
        if self.tuned in KERNEL_LOSSES:
            space["bandwidth"] = DEFAULT_BANDWIDTH
        return space


Arm = LossSpec | TunedArm


class LrSweep(Strict):
    """`tune_lr`: equal footing for ce. Its learning rate is swept first, log-uniform over
    [low, high], with the tuned arms' budget, scheduler, validation split and sweep seed;
    then every arm's runs and every tuned arm's sweep train at the rate it chose."""

    low: float = Field(..., gt=0, le=1.0)
    high: float = Field(..., gt=0, le=1.0)
    # Trials; None: the tuned arms' (one budget for every sweep of a study), else 4.
    num_samples: int | None = Field(None, ge=1, le=64)
    per_arm: bool = Field(
        False,
        description=(
            "true: every arm sweeps its own learning rate with the same budget (equal footing "
            "both ways): ce and each fixed arm over lr alone, a tuned arm over its space and lr "
            "together; each arm's runs train at the rate its own sweep chose, and no sweep "
            "waits for ce's. false: ce's rate is swept first and every arm trains at it."
        ),
    )

    @model_validator(mode="after")
    def _range(self) -> Self:
        if not self.low < self.high:
            raise ValueError("high must be larger than low")
        return self


class StudySweeps(Strict):
    """How every sweep of a study runs, ce's learning-rate sweep and each tuned arm's alike
    (one setting for all: equal footing), so that a protocol can fix them in advance."""

    seed: int | None = Field(
        None, ge=0, description="every trial's training seed; null: max(seeds) + 1"
    )
    validation_size: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="the last training rows that score the trials; null: base.data.eval_size",
    )
    search: Literal["random", "optuna"] = Field(
        "random",
        description="optuna: TPE seeded by the sweep seed (the same study, the same trials)",
    )
    asha: ASHASpec | None = Field(
        None, description="stop weak trials early (on the reported step); null: every trial runs"
    )
    max_concurrent_trials: int | None = Field(
        None,
        ge=1,
        description="trials of one sweep at once (1: one at a time); null: as many as fit",
    )
