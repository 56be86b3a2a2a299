"""A study: does a numeric loss beat plain cross entropy on this data, with this model?

A `StudySpec` names a base job, the arms to compare with `ce` (the baseline, always run),
the seeds every arm runs with, and the primary metric and equivalence margin declared
before any run. The control plane expands it into ordinary jobs (`run_spec`) and, for a
`tuned` arm, first a sweep (`sweep_spec`) on a validation split carved from the training
rows alone, with a seed no evaluation run uses. With `tune_lr`, ce's learning rate is swept
before anything else (`lr_sweep_spec`), on the same validation split with the same budget
and scheduler, and every run and every tuned arm's sweep then trains at the rate it chose.
With `tune_lr.per_arm`, every arm sweeps its own rate instead, with the same budget
(`lr_sweep_spec(label, loss)`; a tuned arm searches lr beside its knobs), so that neither
`ce` nor a numeric loss trains at a rate chosen for the other.
"""

from __future__ import annotations

import re
from typing import Self

from pydantic import Field, field_validator, model_validator

from jobs.spec import study_decoding
from jobs.spec.base import MAX_SEED, MetricName, Strict
from jobs.spec.decoding import StudyDecoding, is_default
from jobs.spec.job import JobSpec, _slug
from jobs.spec.loss import LossSpec
from jobs.spec.metrics import (
    HIGHER_IS_BETTER,
    Margin,
    MetricFamilies,
    Primaries,
    Secondaries,
    check_families,
)
from jobs.spec.power import StudyPower
from jobs.spec.study_sweeps import (
    BASELINE,
    DEFAULT_SAMPLES,
    Arm,
    LrSweep,
    StudySweeps,
    TunedArm,
)
from jobs.spec.tune import SearchDim, TuneSpec

MAX_ARMS = 8
MAX_SEEDS = 20
# The held-out questions a run's calibration needs for a primary read from it: crps, any
# (its K samples); interval_score_90, 12: cross-conformal over 5 folds
# (jobs/calibration/conformal.py) fits the 90 % level on each fold's complement, which needs
# ⌈(m + 1)·0.9⌉ ≤ m, so m ≥ 9, and 12 questions leave 9 at least.
CALIBRATION_QUESTIONS = {"crps": 1, "interval_score_90": 12}
MAX_RUNS = 100  # (arms + ce) × seeds: the spec's own ceiling; the service may set a lower one
STUDY_NAME_MAX = 40  # room for "-<arm>-s<seed>" in a job name of at most 63
ALIAS = re.compile(r"^[A-Za-z][A-Za-z0-9._-]{0,62}$")
__all__ = ["BASELINE", "HIGHER_IS_BETTER", "Arm", "LrSweep", "StudySpec", "StudySweeps", "TunedArm"]


def _lr(lr: float | None) -> dict[str, float]:
    return {} if lr is None else {"lr": lr}


class StudySpec(MetricFamilies, Strict):
    """`POST /v1/studies`: a base job, the arms, the seeds, the pre-declared test."""

    name: str = Field(..., min_length=1, max_length=STUDY_NAME_MAX)
    base: JobSpec
    arms: list[Arm] = Field(..., min_length=1, max_length=MAX_ARMS)
    seeds: list[int] = Field([0, 1, 2, 3, 4], min_length=2, max_length=MAX_SEEDS)
    primary_metric: Primaries = "exact_match"
    secondary_metrics: Secondaries = None
    equivalence_margin: Margin = 0.02
    promote: str | None = Field(None, max_length=63)
    sweeps: StudySweeps = Field(default_factory=StudySweeps)
    tune_lr: LrSweep | None = Field(
        None,
        description=(
            "Sweep ce's learning rate first (log-uniform over [low, high]; num_samples "
            "trials, default the tuned arms' budget), on the same validation split, budget "
            "and scheduler as the tuned arms' sweeps; every arm's runs and every tuned arm's "
            "sweep then train at the rate it chose. null: every run trains at base.train.lr."
        ),
    )
    power: StudyPower | None = Field(
        None,
        exclude_if=lambda v: v is None,  # a stored spec without it dumps as before
        description=(
            "The spread a plan rests on (declared, or from an earlier study on the same task) "
            "and the effect to settle: a dry run reports the smallest effect detectable at "
            "80 % power and the seeds and questions target_effect needs."
        ),
    )
    dry_run: bool = Field(
        False,
        exclude_if=lambda v: v is False,  # a request flag: never part of a stored study
        description="true: POST /v1/studies answers 200 with the plan and queues nothing",
    )
    decoding: StudyDecoding | None = Field(
        None,
        exclude_if=is_default(None),
        description=(
            "The decoding every arm, ce included, is judged by (greedy, number_first, "
            "expected, median, sample_mean, sample_median), or best_on_validation: per arm, "
            "the candidate (base.train.eval_decoding and eval_decodings) best on the primary "
            "metric over validation rows its runs hold out of training (the sweeps' rows), "
            "never on the test questions. null: base.train.eval_decoding."
        ),
    )
    arm_decodings: dict[str, StudyDecoding] = Field(
        default_factory=dict,
        exclude_if=is_default({}),
        description="Per arm label (ce included): its decoding, instead of `decoding`",
    )

    _name = field_validator("name")(_slug)

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("seeds must be distinct")
        if min(v) < 0:
            raise ValueError("seeds must be non-negative")
        if max(v) >= MAX_SEED:  # the sweeps' default seed, max(seeds) + 1, must fit too
            raise ValueError(f"seeds must be below {MAX_SEED}")
        return v

    @field_validator("arms")
    @classmethod
    def _no_ce_arm(cls, v: list[Arm]) -> list[Arm]:
        for arm in v:
            if isinstance(arm, LossSpec) and arm.name == BASELINE:
                raise ValueError("ce is the baseline every study runs; list only other losses")
        return v

    @field_validator("promote")
    @classmethod
    def _alias(cls, v: str | None) -> str | None:
        if v is not None and not ALIAS.match(v):
            raise ValueError("an alias: a letter, then up to 62 of A-Z a-z 0-9 . _ -")
        return v

    @model_validator(mode="after")
    def _fits(self) -> Self:
        check_families(self.primaries, self.secondary_metrics, self.equivalence_margin)
        self._calibrates_primaries()
        runs = (len(self.arms) + 1) * len(self.seeds)
        if runs > MAX_RUNS:
            raise ValueError(f"seeds: {runs} runs ((arms + ce) × seeds); at most {MAX_RUNS}")
        if (self.sweeps.seed or 0) > MAX_SEED:
            raise ValueError(f"sweeps.seed: at most {MAX_SEED}")
        if self.sweeps.seed in self.seeds:
            raise ValueError(
                f"sweeps.seed: {self.sweeps.seed} is an evaluation seed; a sweep trains with "
                "a seed no evaluation run uses"
            )
        if self.base.data.eval_split == "validation":
            # The sweeps' split: the runs would be scored on what tuning chose by.
            raise ValueError(
                "base.data.eval_split: validation is the study's sweeps' split (training rows);"
                " its runs are scored on interpolate or extrapolate"
            )
        if self.tune_lr is not None:
            budgets = {arm.num_samples for arm in self.tuned_arms}
            if self.tune_lr.num_samples is not None:
                budgets.add(self.tune_lr.num_samples)
            if len(budgets) > 1:
                raise ValueError(
                    "tune_lr.num_samples: ce's learning-rate sweep and every tuned arm's sweep "
                    f"take one budget (equal footing), not {sorted(budgets)} trials"
                )
            try:
                self.lr_sweep_spec()
            except ValueError as error:
                raise ValueError(f"tune_lr: the sweep would not run: {error}") from None
        for label, arm in zip(self.labels(), self.arms, strict=True):
            try:
                if isinstance(arm, TunedArm):
                    self.sweep_spec(label, arm)
                elif self.per_arm_lr:
                    self.lr_sweep_spec(label, arm)
            except ValueError as error:  # pydantic's ValidationError is one
                raise ValueError(f"arms: the sweep of {label} would not run: {error}") from None
        return self

    @model_validator(mode="after")
    def _decodings(self) -> Self:
        study_decoding.check(self)
        if study_decoding.on_validation(self):
            try:
                self.run_spec(BASELINE, self.base.loss, self.seeds[0])
            except ValueError as error:
                raise ValueError(f"decoding: best_on_validation: {error}") from None
        return self

    def _calibrates_primaries(self) -> None:
        """A primary read from the end-of-job calibration needs one that can measure it,
        else every run lacks it and the study tests nothing on it (no 422 until now)."""
        questions = min(self.base.calibration.questions, self.base.data.eval_size)
        for metric in self.primaries:
            needed = CALIBRATION_QUESTIONS.get(metric, 0)
            if questions < needed:
                raise ValueError(
                    f"base.calibration.questions: the primary {metric} comes from each run's "
                    f"calibration, which needs at least {needed} held-out questions for it "
                    f"(calibration.questions and data.eval_size); it would get {questions}"
                )

    @property
    def tuned_arms(self) -> list[TunedArm]:
        return [a for a in self.arms if isinstance(a, TunedArm)]

    @property
    def total_runs(self) -> int:
        """Evaluation runs: every arm and ce on every seed (sweep trials come on top)."""
        return (len(self.arms) + 1) * len(self.seeds)

    def labels(self) -> list[str]:
        """Each arm's name in results: its loss; `<loss>-tuned`; `-2`, `-3` for repeats."""
        seen: dict[str, int] = {}
        out = []
        for arm in self.arms:
            label = f"{arm.tuned}-tuned" if isinstance(arm, TunedArm) else arm.name
            seen[label] = seen.get(label, 0) + 1
            out.append(label if seen[label] == 1 else f"{label}-{seen[label]}")
        return out

    def arm(self, label: str) -> Arm | None:
        return dict(zip(self.labels(), self.arms, strict=True)).get(label)

    @property
    def sweep_seed(self) -> int:
        """The training seed of every sweep trial: one no evaluation run uses."""
        return max(self.seeds) + 1 if self.sweeps.seed is None else self.sweeps.seed

    @property
    def register_as(self) -> str:
        return self.base.register_as or self.name

    @property
    def lr_samples(self) -> int:
        """The trials of ce's learning-rate sweep: the one budget of the study's sweeps."""
        given = self.tune_lr.num_samples if self.tune_lr is not None else None
        if given is not None:
            return given
        return self.tuned_arms[0].num_samples if self.tuned_arms else DEFAULT_SAMPLES

    def run_spec(self, label: str, loss: LossSpec, seed: int, lr: float | None = None) -> JobSpec:
        """One evaluation run: the base with this loss and training seed (data unchanged, so
        every run of the study is scored on the same held-out questions), at `lr` when ce's
        learning-rate sweep chose one."""
        data = self.base.model_dump()
        data["name"] = f"{self.name}-{label}-s{seed}"[:63]
        data["loss"] = loss.model_dump()
        data["train"] = {**data["train"], "seed": seed, **_lr(lr)}
        data["register_as"] = self.register_as
        study_decoding.run_overrides(self, data)  # the decodings scored, validation rows
        return JobSpec.model_validate(data)

    @property
    def per_arm_lr(self) -> bool:
        """Every arm sweeps its own learning rate (`tune_lr.per_arm`)."""
        return self.tune_lr is not None and self.tune_lr.per_arm

    def sweep_spec(self, label: str, arm: TunedArm, lr: float | None = None) -> TuneSpec:
        """The sweep of a tuned arm, at `lr` when ce's learning-rate sweep chose one; with
        `tune_lr.per_arm`, over its space and its own learning rate together."""
        name = f"{self.name}-{label}-sweep"
        space = arm.search_space()
        if self.per_arm_lr:
            space = {**space, "lr": self._lr_dim()}
        return self._sweep(name, {"name": arm.tuned}, space, arm.num_samples, lr)

    def lr_sweep_spec(self, label: str = BASELINE, loss: LossSpec | None = None) -> TuneSpec:
        """A learning-rate sweep (`tune_lr`), like a tuned arm's over `lr` alone: ce's, or
        with `tune_lr.per_arm` a fixed arm's (`label`, at its `loss`)."""
        knobs: dict[str, object] = {"name": BASELINE} if loss is None else loss.model_dump()
        space = {"lr": self._lr_dim()}
        return self._sweep(f"{self.name}-{label}-lr-sweep", knobs, space, self.lr_samples, None)

    def _lr_dim(self) -> SearchDim:
        if self.tune_lr is None:
            raise ValueError("tune_lr: this study sweeps no learning rate")
        return SearchDim(kind="loguniform", low=self.tune_lr.low, high=self.tune_lr.high)

    def _sweep(
        self,
        name: str,
        loss: dict[str, object],
        space: dict[str, SearchDim],
        num_samples: int,
        lr: float | None,
    ) -> TuneSpec:
        """Every sweep of a study: the base with `loss`'s knobs, trained on its training rows minus
        the last `sweeps.validation_size` (default `eval_size`) and scored on those
        (`data.eval_split: validation`, so no question an evaluation run is scored on is
        seen), with `sweep_seed` and the study's search and early stopping."""
        base = self.base.model_dump()
        base["name"] = name[:63]
        base["loss"] = {**base["loss"], **loss}
        held = self.sweeps.validation_size or base["data"]["eval_size"]
        base["data"] = {**base["data"], "eval_split": "validation", "eval_size": held}
        base["train"] = {**base["train"], "seed": self.sweep_seed, **_lr(lr)}
        base["register_as"] = self.register_as
        metric: MetricName = "exact_match" if HIGHER_IS_BETTER[self.primary] else "mae"
        return TuneSpec(
            name=base["name"],
            base=JobSpec.model_validate(base),
            space=space,
            num_samples=num_samples,
            search=self.sweeps.search,
            asha=self.sweeps.asha,
            max_concurrent_trials=self.sweeps.max_concurrent_trials,
            metric=metric,
        )

    def tuned_loss(self, arm: TunedArm, best_config: dict[str, object]) -> LossSpec:
        """The tuned arm's loss: the base's loss knobs, its name, the sweep's best values."""
        loss = {**self.base.loss.model_dump(), "name": arm.tuned}
        loss.update({k: v for k, v in best_config.items() if k in LossSpec.model_fields})
        return LossSpec.model_validate(loss)
