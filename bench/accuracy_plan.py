"""The specs of the accuracy study: scales, named parts, loss labels, the smmd sweep.

A part is a set of cells (model, task) × loss labels × seeds that finishes in under an
hour on 2 idle cores. A loss label is a loss name with optional LossSpec overrides:
`emd`, `emd[weight=1]`, `ntl_mse[distance=absolute]`; `smmd_tuned` is Smooth-MMD with
the bandwidth and weight the sweep found. The pretrained scale's cells are study specs
(bench/studies/<part>.yaml, read by accuracy_studies.py): its runs, arms, seeds and sweep
spaces come from them.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accuracy_runs import StudyError
from accuracy_studies import arms, load_study, study_job, study_loss
from accuracy_sweeps import sweep

from jobs.losses.catalog import multi_digit_losses
from jobs.spec import JobSpec, LossSpec, StudySpec, TunedArm

LOSSES = ("ce", "emd", "ntil", "mmd", "smmd", "ntl_mse", "del", "dist2", "ntl_number", "smmd_tuned")
NUMERIC = ("emd", "ntil", "mmd", "smmd", "ntl_mse", "del", "dist2", "ntl_number")
TASKS = ("add", "listsum", "units", "mul", "arithmetic", "clock", "jsonl")
LAMBDAS = (0.03, 0.1, 0.3, 1.0, 3.0)
DEFAULT_WEIGHT = LossSpec().weight
# Before the multi-digit fix: the distance terms on |a - b| (what `auto` used to be).
BEFORE = tuple(f"{n}[distance=absolute]" for n in ("emd", "ntil", "ntl_mse"))
MAX_NEW_TOKENS = {"arithmetic": 16, "clock": 8, "jsonl": 8}  # else 8
_LABEL = re.compile(r"^([a-z][a-z0-9_]*)(?:\[(\w+)=([\w.]+)\])?$")


def multi_digit(labels: tuple[str, ...]) -> tuple[str, ...]:
    """The labels a multi-digit tokenizer can train: del and dist2 are digit-level (refused)."""
    keep = {"ce", "smmd_tuned", *multi_digit_losses()}
    return tuple(label for label in labels if label.partition("[")[0] in keep)


def lambda_label(name: str, weight: float) -> str:
    """`emd[weight=0.1]`; the plain name at the default λ (the main table's runs)."""
    return name if weight == DEFAULT_WEIGHT else f"{name}[weight={weight:g}]"


@dataclass(frozen=True)
class Model:
    source: str
    lr: float
    batch_size: int
    steps: dict[str, int]  # per task
    threads: int = 1  # torch threads (and Ray CPUs) per run
    train_size: int = 50_000
    eval_size: int = 300
    evals: int = 5  # held-out evaluations per run: the learning curve's points
    max_length: int = 96  # tokens of prompt + answer (an image adds its placeholders)
    # The pretrained protocol (bench/protocol.md): ce's learning rate is swept first and
    # every arm of the cell trains at it; sweeps train with a seed no evaluation run uses.
    tune_lr: bool = False
    sweep_seed: int = 0
    at_once: int | None = None  # runs (and sweep trials) at a time; None: what the cores hold


@dataclass(frozen=True)
class Part:
    cells: tuple[tuple[str, str], ...]  # (model label, task)
    losses: tuple[str, ...] = LOSSES
    seeds: int = 5
    about: str = ""


CHAR_STEPS = {"add": 1000, "listsum": 500, "units": 800, "mul": 1500, "arithmetic": 1500,
              "clock": 1500, "jsonl": 1000}  # fmt: skip
# Tasks with few distinct questions (2-digit addition has 10,000, units 11,000) train on fewer.
TRAIN_CAP = {"add": 8000, "units": 8000}
SMOLLM2 = "bundled:smollm2-135m"
# bench/protocol.md's cells (units, jsonl), then its eligibility fallbacks in order.
PRETRAINED_PARTS = ("smollm2-units", "smollm2-jsonl", "smollm2-listsum", "smollm2-add")
PROTOCOL_SWEEP_SEED = 1000  # bench/protocol.md; the cells' files say it too (sweeps.seed)


def pretrained_model() -> Model:
    """SmolLM2-135M as the pretrained cells' study specs train it (what they share, from the
    first; each cell's steps from its own). `lr` is only the fallback ce's sweep replaces."""
    studies = {part.removeprefix("smollm2-"): load_study(part) for part in PRETRAINED_PARTS}
    base = studies["units"].base
    return Model(
        base.model.source,
        base.train.lr,
        base.train.batch_size,
        {task: study.base.train.steps or 0 for task, study in studies.items()},
        threads=round(base.scaling.cpus_per_worker),
        evals=(base.train.steps or 0) // (base.train.eval_every or 1),
        eval_size=base.data.eval_size,
        max_length=base.data.max_length,
        tune_lr=all(study.tune_lr is not None for study in studies.values()),
        sweep_seed=PROTOCOL_SWEEP_SEED,
        at_once=1,  # the protocol's amendment 1: one run at a time
    )


SCALES: dict[str, dict[str, Model]] = {
    "small": {
        # ~60-90 ms per step of batch 64 on one core: the 99-symbol head is cheap.
        "char": Model("random:tiny-char", 3e-3, 64, CHAR_STEPS),
        # LLaMA-3's number tokens (every 1-3 digit string) with the same small text vocabulary.
        "char3": Model("random:tiny-char3", 3e-3, 64, CHAR_STEPS),
        # The real LLaMA-3 tokenizer: its 128k-row head makes a step ~1 s at batch 8 on one
        # core, so 200 steps: enough for the distance terms to blow up answers, not to learn.
        "llama3": Model("random:tiny-llama3", 5e-3, 8, {"units": 200}, evals=2, eval_size=200),
        # SmolLM2-135M-Instruct fine-tuned: ~1-4 s per step of batch 8 on 2 cores.
        "smollm2": Model(SMOLLM2, 1e-4, 8, {"units": 60}, threads=2, evals=2, eval_size=100),
        # The tiny Llava (random CLIP tower + projector + the char Llama): ~0.1 s per step of
        # batch 32 on one core; it starts reading the bars after ~400 steps. 8,000 pictures
        # (their pixel values are held in memory: ~100 MB).
        "vlm": Model(
            "random:vlm-tiny",
            3e-3,
            32,
            {"bars": 1500, "dots": 1500},
            train_size=8000,
            max_length=160,
        ),
    },
    "paper": {
        "smollm2": Model(SMOLLM2, 5e-5, 8, dict.fromkeys(TASKS, 200), threads=2),
    },
    # bench/protocol.md, from the cells' study specs (bench/studies/): 150 steps of batch 8,
    # evaluations every 30 steps on 150 questions, one thread, one run at a time.
    "pretrained": {"smollm2": pretrained_model()},
}
# bench/protocol.md's arms, as the study specs name them: ce, emd, smmd_tuned, del[weight=1]
# (DEL at its authors' objective, ce + 1 · del).
PRETRAINED_ARMS = tuple(arms(load_study(PRETRAINED_PARTS[0])))
PARTS: dict[str, dict[str, Part]] = {
    "small": {
        "add": Part((("char", "add"),), about="2-digit addition (answers < 200)"),
        "listsum": Part((("char", "listsum"),), about="sums of 3-4 numbers < 20"),
        "units": Part((("char", "units"),), about="unit conversions (answers < 5000)"),
        "multidigit": Part(
            (("char3", "listsum"),),
            losses=(*multi_digit(LOSSES), *BEFORE),
            about="LLaMA-3-style 1-3 digit number tokens, before/after the distance fix",
        ),
        "llama3": Part(
            (("llama3", "units"),),
            # no smmd_tuned: a sweep costs more than the part
            losses=(*multi_digit(LOSSES[:-1]), *BEFORE),
            seeds=1,  # ~9 min a run on 2 busy cores: a parseability diagnostic, not a test
            about="the real LLaMA-3 tokenizer, before/after the distance fix (parseability)",
        ),
        "lambda": Part(
            (("char", "listsum"),),  # the cheapest learnable cell: 500 steps a run
            losses=("ce", *(lambda_label(n, w) for n in NUMERIC for w in LAMBDAS)),
            seeds=3,
            about="weight (λ) sensitivity of every numeric loss",
        ),
        # The hard rows, one part each: 35 runs of 1,500 steps plus a sweep fill ~45 min.
        "arithmetic": Part(
            (("char", "arithmetic"),), about="DeepMind add_or_sub (decimals, 10+ digits)"
        ),
        "clock": Part((("char", "clock"),), about="clock arithmetic (HH:MM after N minutes)"),
        "smollm2": Part(
            (("smollm2", "units"),),
            losses=("ce", "emd", "smmd", "ntl_mse"),
            seeds=2,
            about="the bundled SmolLM2-135M fine-tuned",
        ),
        # Issue 20: an image task, ce against Smooth-MMD (the best numeric loss of the
        # arithmetic row) at 5 seeds: ~30 min on 2 cores.
        "image": Part(
            (("vlm", "bars"),),
            losses=("ce", "smmd"),
            seeds=5,
            about="bar values read from 32 px bar charts by the tiny Llava (random:vlm-tiny)",
        ),
    },
    "paper": {"paper": Part((("smollm2", "arithmetic"), ("smollm2", "clock")))},
    "pretrained": {
        part: Part(
            (("smollm2", load_study(part).base.data.task),),
            losses=tuple(arms(load_study(part))),
            seeds=len(load_study(part).seeds),
            about=f"SmolLM2-135M on {load_study(part).base.data.task} (bench/studies/{part}.yaml)",
        )
        for part in PRETRAINED_PARTS
    },
}
TUNE_SAMPLES = 6  # trials of a sweep of a cell without a study spec (--tune-samples)
SMMD_SPACE = {
    "bandwidth": {"kind": "loguniform", "low": 0.25, "high": 16.0},
    "weight": {"kind": "loguniform", "low": 0.03, "high": 3.0},
}


def parse_label(label: str) -> tuple[str, dict[str, Any]]:
    """`emd[weight=1]` → ("emd", {"weight": 1.0}); the override is a LossSpec field."""
    match = _LABEL.match(label)
    if match is None:
        raise ValueError(f"bad loss label {label!r}")
    name, key, value = match.groups()
    if key is None:
        return name, {}
    return name, {key: float(value) if re.fullmatch(r"[\d.]+", value) else value}


def weight_of(label: str) -> float:
    """The λ a label trains with (the LossSpec default unless it overrides weight)."""
    return float(parse_label(label)[1].get("weight", DEFAULT_WEIGHT))


class Plan:
    """The specs of one invocation: a scale's models, its parts, the flags' overrides."""

    def __init__(self, args: argparse.Namespace, storage: Path):
        self.args, self.storage = args, storage
        self.models = SCALES[args.scale]
        self.parts = [PARTS[args.scale][p] for p in args.part]
        # Runs at a time: as many as the cores hold at the parts' thread counts (two 2-thread
        # SmolLM2 runs on 2 cores took 28 s a step each, one alone ~4 s).
        models = [self.model(label) for part in self.parts for label, _ in part.cells]
        threads = max(m.threads for m in models)
        at_once = min((m.at_once for m in models if m.at_once), default=None)
        self.workers = args.workers or at_once or max(1, (os.cpu_count() or 2) // threads)
        self.user_jsonl = storage / "user-data" / "questions.jsonl"
        # Finished runs' and sweeps' records, kept in the repository (resumable anywhere).
        self.records: Path | None = args.records
        # Each run's interval calibrated and measured as a version's is (issue 33). Not in
        # the pretrained protocol: 200 questions × (16 samples + decodings) on one thread
        # would about double each run, and bench/protocol.md was committed without it.
        self.calibrate = args.scale != "pretrained"

    def model(self, label: str) -> Model:
        return self.models[label]

    def seeds(self, part: Part) -> int:
        return self.args.seeds or part.seeds

    def steps(self, label: str, task: str) -> int:
        return self.args.steps or self.model(label).steps[task]

    def losses(self, part: Part) -> tuple[str, ...]:
        return tuple(self.args.losses) if self.args.losses else part.losses

    def study(self, label: str, task: str) -> StudySpec | None:
        """The cell's study spec (the pretrained scale's: bench/studies/<label>-<task>.yaml),
        with the flags' overrides of its base; None for the other scales."""
        if self.args.scale != "pretrained":
            return None
        study = load_study(f"{label}-{task}")
        flags = ("steps", "train_size", "eval_size", "lr")
        if not any(getattr(self.args, flag) for flag in flags):
            return study
        base = study.base.model_dump()
        if self.args.steps:
            evals = (study.base.train.steps or 1) // (study.base.train.eval_every or 1)
            base["train"].update(schedule(self.args.steps, max(1, evals)))
        for flag, part in (("train_size", "data"), ("eval_size", "data"), ("lr", "train")):
            if getattr(self.args, flag):
                base[part][flag] = getattr(self.args, flag)
        return study.model_copy(update={"base": JobSpec.model_validate(base)})

    def loss(
        self, loss_label: str, tuned: dict[str, Any] | None, label: str, task: str
    ) -> LossSpec:
        """A label's loss: the cell's study arm where it has a study spec; `smmd_tuned` with
        its sweep's best config (`tuned`)."""
        study = self.study(label, task)
        if study is not None:
            try:
                return study_loss(study, loss_label, tuned and tuned["config"])
            except ValueError as error:
                raise StudyError(f"--losses: {error}") from None
        name, overrides = parse_label(loss_label)
        if name == "smmd_tuned":
            assert tuned is not None, "the sweep runs before the tuned runs are planned"
            return LossSpec(name="smmd", **tuned["config"], **overrides)
        return LossSpec(name=name, **overrides)  # LossSpec defaults = the papers' defaults

    def job(
        self, label: str, task: str, loss: LossSpec, seed: int, lr: float | None = None
    ) -> JobSpec:
        """One run's spec; `lr` is the cell's swept learning rate where it has one. A cell
        with a study spec: that study's run (`StudySpec.run_spec`), named the bench's way."""
        name = f"acc-{label}-{task}-{loss.name}-s{seed}"
        study = self.study(label, task)
        if study is not None:
            path = str(self.user_jsonl) if task == "jsonl" else None
            return study_job(study, loss, seed, lr, name, path)
        m, steps = self.model(label), self.steps(label, task)
        data: dict[str, Any] = {
            "task": task,
            "train_size": self.args.train_size or min(m.train_size, TRAIN_CAP.get(task, 10**9)),
            "eval_size": self.args.eval_size or m.eval_size,
            "max_length": m.max_length,
        }
        if task == "jsonl":
            data["path"] = str(self.user_jsonl)
        return JobSpec.model_validate(
            {
                "name": name,
                "model": {"source": m.source, "use_chat_template": False},
                "data": data,
                "loss": loss.model_dump(),
                "train": {
                    **schedule(steps, m.evals),
                    "batch_size": m.batch_size,
                    "lr": lr or self.args.lr or m.lr,
                    "seed": seed,
                    "keep_top_k": 1,
                    "eval_max_new_tokens": MAX_NEW_TOKENS.get(task, 8),
                },
                "scaling": {"num_workers": 1, "cpus_per_worker": m.threads},
            }
        )

    def tune_samples(self, label: str, task: str) -> int:
        """Trials of each of the cell's sweeps: --tune-samples, else its study's budget."""
        study = self.study(label, task)
        return self.args.tune_samples or (study.lr_samples if study else TUNE_SAMPLES)

    def tune(self, label: str, task: str, lr: float | None = None) -> dict[str, Any]:
        """Sweep smmd's bandwidth and weight on a validation split; the best config. Its
        space is the study's tuned arm's where the cell has a study spec."""
        study, space = self.study(label, task), SMMD_SPACE
        if study is not None:
            _, arm = arms(study)["smmd_tuned"]
            assert isinstance(arm, TunedArm)
            space = {k: d.model_dump(exclude_none=True) for k, d in arm.search_space().items()}
        base = self.job(label, task, LossSpec(name="smmd"), self.model(label).sweep_seed, lr)
        return sweep(self, label, task, base, space, f"acc-tune-{label}")

    def tune_lr(self, label: str, task: str) -> dict[str, Any]:
        """Sweep ce's learning rate over its study's `tune_lr` range, with the same budget
        and validation split."""
        study = self.study(label, task)
        if study is None or study.tune_lr is None:
            raise StudyError(f"{label}/{task}: no study spec gives ce's learning-rate range")
        space = {"lr": {"kind": "loguniform", "low": study.tune_lr.low, "high": study.tune_lr.high}}
        base = self.job(label, task, LossSpec(name="ce"), self.model(label).sweep_seed)
        return sweep(self, label, task, base, space, f"acc-tune-lr-{label}")


def schedule(steps: int, evals: int) -> dict[str, int]:
    """A run's length and cadence: warm-up over the first 5 % of steps, and one report (each
    carries its window's mean step time) per held-out evaluation, `evals` of them."""
    every = max(1, steps // evals)
    return {
        "steps": steps,
        "warmup_steps": min(max(1, steps // 20), steps - 1),
        "log_every": every,
        "eval_every": every,
    }


@dataclass
class Todo:
    """One run to do: its key in the results, its spec and its run folder's name."""

    key: dict[str, Any]
    spec: JobSpec
    job_id: str
    extra_splits: list[str] = field(default_factory=list)
