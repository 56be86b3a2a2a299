"""The specs of the accuracy table: per-scale defaults, flags' overrides, the smmd sweep."""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accuracy_runs import write_validation_split

from jobs.spec import JobSpec, LossSpec, TuneSpec
from jobs.tune import run_tune

LOSSES = ("ce", "emd", "ntil", "mmd", "smmd", "ntl_mse", "smmd_tuned")
TASKS = ("arithmetic", "clock", "jsonl")
MAX_NEW_TOKENS = {"arithmetic": 16, "clock": 8, "jsonl": 8}  # extrapolate answers are long


@dataclass(frozen=True)
class Scale:
    models: dict[str, str]  # tokenizer label → model source (the first is the main one)
    steps: dict[str, int]  # per task
    lr: float
    batch_size: int = 8
    warmup: int = 10
    train_size: int = 4000
    eval_size: int = 64
    threads: int = 1  # torch threads (and Ray CPUs) per run
    workers: int = 2  # runs at a time


SCALES = {
    # ~0.15-0.3 s per step of batch 8 on one core (vocab 49k; llama3's 128k: ~1.8x that).
    "small": Scale(
        models={"digit": "random:tiny-digit", "llama3": "random:tiny-llama3"},
        steps={"arithmetic": 200, "clock": 120, "jsonl": 120},
        lr=5e-3,
    ),
    "paper": Scale(
        models={"smollm2": "bundled:smollm2-135m"},
        steps={"arithmetic": 200, "clock": 200, "jsonl": 200},
        lr=5e-5,
        threads=2,
        workers=1,
    ),
}


class Plan:
    """The specs of one invocation: scale defaults with the flags' overrides."""

    def __init__(self, args: argparse.Namespace, storage: Path):
        self.args, self.scale, self.storage = args, SCALES[args.scale], storage
        self.threads = args.threads or self.scale.threads
        self.lr = args.lr or self.scale.lr
        self.workers = args.workers or self.scale.workers
        self.user_jsonl = storage / "user-data" / "questions.jsonl"

    def steps(self, task: str) -> int:
        return self.args.steps or self.scale.steps[task]

    def cells(self) -> list[tuple[str, str]]:
        """(tokenizer, task) pairs: every task for the first tokenizer, the study's for others."""
        first, *rest = self.args.tokenizers
        out = [(first, t) for t in self.args.tasks]
        return out + [(tok, t) for tok in rest for t in self.args.study_tasks]

    def job(self, tokenizer: str, task: str, loss: LossSpec, seed: int) -> JobSpec:
        steps = self.steps(task)
        train_size = self.args.train_size or self.scale.train_size
        data: dict[str, Any] = {
            "task": task,
            "train_size": train_size,
            "eval_size": self.args.eval_size or self.scale.eval_size,
            "max_length": 96,
        }
        if task == "jsonl":
            data["path"] = str(self.user_jsonl)
        return JobSpec.model_validate(
            {
                "name": f"acc-{tokenizer}-{task}-{loss.name}-s{seed}",
                "model": {"source": self.scale.models[tokenizer], "use_chat_template": False},
                "data": data,
                "loss": loss.model_dump(),
                "train": {
                    "steps": steps,
                    "batch_size": self.scale.batch_size,
                    "lr": self.lr,
                    "warmup_steps": min(self.scale.warmup, steps - 1),
                    "seed": seed,
                    "log_every": steps,  # one report: step_time_s is the run's mean step
                    "keep_top_k": 1,
                    "eval_max_new_tokens": MAX_NEW_TOKENS[task],
                },
                "scaling": {"num_workers": 1, "cpus_per_worker": self.threads},
            }
        )

    def tune(self, tokenizer: str) -> dict[str, Any]:
        """Sweep smmd's bandwidth and weight on the validation split; the best config."""
        base = self.job(tokenizer, "arithmetic", LossSpec(name="smmd"), seed=0)
        folder = self.storage / "tune-data" / tokenizer
        val = self.args.tune_val_size
        train_path, val_path, n_train = write_validation_split(base, folder, val)
        steps = self.args.tune_steps or base.train.steps or 1
        every = max(1, steps // 4)
        data = base.model_dump()
        data["data"] = {
            "task": "jsonl",
            "path": str(train_path),
            "eval_path": str(val_path),
            "train_size": n_train,
            "eval_size": val,
            "max_length": 96,
        }
        data["train"].update(
            steps=steps,
            warmup_steps=min(base.train.warmup_steps, steps - 1),
            eval_every=every,
            checkpoint_every=every,
            log_every=every,
            metric=self.args.tune_metric,
        )
        data["scaling"]["cpus_per_worker"] = 0.99 * self.threads  # + 0.01 for the trial driver
        spec = TuneSpec.model_validate(
            {
                "name": f"acc-tune-{tokenizer}",
                "base": data,
                "space": {
                    "bandwidth": {"kind": "loguniform", "low": 0.25, "high": 16.0},
                    "weight": {"kind": "uniform", "low": 0.05, "high": 1.0},
                },
                "num_samples": self.args.tune_samples,
                "search": "optuna",  # seeded (base.train.seed): the same command, same trials
                "asha": {"grace_period": every, "reduction_factor": 2},
                "metric": self.args.tune_metric,
                "max_concurrent_trials": self.workers,
            }
        )
        digest = hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:8]
        result = run_tune(spec, f"acc-tune-{tokenizer}-{digest}", str(self.storage))
        if result["status"] != "succeeded":
            raise RuntimeError(f"the smmd sweep for {tokenizer} failed: {result}")
        metric = f"validation eval_{self.args.tune_metric} {result['metrics']}"
        return {
            "config": result["best_config"],
            "detail": f"{result['trials']} trials x {steps} steps, best {metric}",
        }
