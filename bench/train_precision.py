"""Training in fp32 against bf16 (autocast) and bf16 weights (float32 master copies and
moments), in one run: the step time, interleaved, and the held-out accuracy over seeds.

    nice -n 5 .venv/bin/python -m bench.train_precision [--rounds 8] [--threads 1]
        [--seeds 0 1 2] [--acc-steps 800] [--skip-accuracy] [--skip-timing]

Step time: for each model (SmolLM2-135M, `bundled:smollm2-135m`, batch 8 of add/sub
questions; `random:tiny-char`, batch 64 of unit conversions: the accuracy setting), one copy
per precision is built once, then they take turns, one optimizer step each per round (the
order rotating every round) on the same fixed batch, after two warm-up rounds: a change of
load falls on all three alike. Each step is the training engine's (jobs/train/engine.py)
without DDP: the loss from hidden states (jobs/losses/head.py), AdamW, clipping; for
bf16_weights the float32 master copies (jobs/train/master.py). Medians, ratios to fp32 and
the load average go to the JSON. The losses are smmd (SmolLM2) and emd (tiny-char).

Accuracy: `random:tiny-char` trained from scratch on unit conversions with emd
(examples/char-units-emd.yaml), through numtune's own job function (jobs.train.runner.run_job,
a Ray Train worker as the service runs a job), once per seed and precision, seeds
outermost so that load drifts hit a seed's arms alike; held-out exact match and MAE per
run, and for each bf16 variant the paired difference to fp32 over seeds with its 95 % t
interval (jobs/stats). bf16 matches fp32 when that interval's lower end stays above -2
points of exact match.

Writes bench/results/train_precision.json (after each part) and train_precision.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch

BENCH = Path(__file__).resolve().parent

from bench.train_precision_accuracy import accuracy, plot  # noqa: E402
from jobs.data import load_task  # noqa: E402
from jobs.data.tokenize import MODEL_INPUTS, collate, encode_example  # noqa: E402
from jobs.losses import BatchCounts, NumericVocab, build_loss, shift_labels  # noqa: E402
from jobs.losses.head import HeadLoss  # noqa: E402
from jobs.modeling.model import load_model_and_tokenizer  # noqa: E402
from jobs.modeling.precision import bf16_native, cpu_flags  # noqa: E402
from jobs.spec import DataSpec, JobSpec, LossSpec, ModelSpec  # noqa: E402
from jobs.spec.parts import ResolvedPrecision  # noqa: E402
from jobs.train.master import MasterWeights  # noqa: E402
from jobs.train.optim import adamw, trainable_parameters  # noqa: E402

RESULTS = BENCH / "results"
OUT = RESULTS / "train_precision.json"
MODES: tuple[ResolvedPrecision, ...] = ("fp32", "bf16", "bf16_weights")
# (model source, loss, data, batch size): SmolLM2 at the batch 8 of short questions;
# tiny-char at the accuracy setting's batch 64.
MODELS = {
    "smollm2-135m": ("bundled:smollm2-135m", "smmd", {"task": "arithmetic"}, 8),
    "tiny-char": ("random:tiny-char", "emd", {"task": "units"}, 64),
}


class Stepper:
    """One copy of a model in one precision, stepping as the DDP engine does."""

    def __init__(self, source: str, loss: str, mode: ResolvedPrecision, spec: JobSpec):
        model, tokenizer = load_model_and_tokenizer(
            ModelSpec(source=source, use_chat_template=False), seed=0
        )
        if mode == "bf16_weights":
            torch.nn.Module.to(model, torch.bfloat16)
        model.train()
        self.model, self.tokenizer, self.mode = model, tokenizer, mode
        self.vocab = NumericVocab.from_tokenizer(tokenizer)
        params = trainable_parameters(model)
        self.master = MasterWeights(params) if mode == "bf16_weights" else None
        self.optimizer = adamw(self.master.params if self.master else params, spec)
        self.loss = HeadLoss(build_loss(LossSpec(name=loss), self.vocab), model)

    def step(self, batch: dict[str, torch.Tensor]) -> tuple[float, float]:
        """One optimizer step on `batch`: (seconds, loss)."""
        start = time.perf_counter()
        labels = shift_labels(batch["labels"])
        counts = BatchCounts.of([labels], self.vocab)
        inputs = {k: v for k, v in batch.items() if k in MODEL_INPUTS}
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.mode == "bf16"):
            out = self.loss(self.model, inputs, labels, counts)
        out.total.backward()
        if self.master is not None:
            self.master.pull_grads()
        params = self.master.params if self.master else trainable_parameters(self.model)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.master is not None:
            self.master.push_weights()
        return time.perf_counter() - start, float(out.total.detach())


def fixed_batch(stepper: Stepper, data: dict[str, Any], size: int) -> dict[str, torch.Tensor]:
    """The first `size` training questions of the task, tokenised as jobs do: [B, T]."""
    task = load_task(DataSpec(train_size=size, eval_size=1, max_length=96, **data))
    rows = [encode_example(stepper.tokenizer, ex, 96, False) for ex in task.train]
    return collate(rows, stepper.tokenizer.pad_token_id)


def time_model(name: str, rounds: int) -> dict[str, Any]:
    source, loss, data, size = MODELS[name]
    spec = JobSpec.model_validate({"name": "bench", "model": {"source": source}})
    steppers = {mode: Stepper(source, loss, mode, spec) for mode in MODES}
    batch = fixed_batch(steppers["fp32"], data, size)
    seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
    losses: dict[str, list[float]] = {mode: [] for mode in MODES}
    for turn in range(rounds + 2):  # two warm-up rounds
        order = MODES[turn % 3 :] + MODES[: turn % 3]
        for mode in order:
            took, value = steppers[mode].step(batch)
            losses[mode].append(value)
            if turn >= 2:
                seconds[mode].append(took)
        print(f"{name} round {turn}: " + ", ".join(f"{m} {seconds[m][-1:]}" for m in MODES))
    median = {mode: statistics.median(s) for mode, s in seconds.items()}
    return {
        "source": source, "loss": loss, "batch": list(batch["input_ids"].shape),
        "rounds": rounds, "seconds": seconds, "median_s": median,
        "speedup_vs_fp32": {mode: median["fp32"] / median[mode] for mode in MODES},
        "paired_speedup_vs_fp32": paired_speedup(seconds),
        "losses": losses, "load_average_after": os.getloadavg(),
    }  # fmt: skip


def paired_speedup(seconds: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """fp32's time over each mode's in the same round: median and range over rounds (a
    round's steps ran back to back, so a load change between rounds cancels)."""
    out = {}
    for mode, times in seconds.items():
        ratios = sorted(f / t for f, t in zip(seconds["fp32"], times, strict=True))
        out[mode] = {"median": statistics.median(ratios), "min": ratios[0], "max": ratios[-1]}
    return out


def derived(report: dict[str, Any]) -> dict[str, Any]:
    """The paired speed-ups of each timing, and what the accuracy says about the default."""
    for row in report.get("timing", {}).values():
        row["paired_speedup_vs_fp32"] = paired_speedup(row["seconds"])
    matched = report.get("accuracy", {}).get("matches_fp32_within_margin", {})
    report["decision"] = {
        "default": "bf16" if matched.get("bf16") else "fp32",
        "auto_on_native_bf16": "bf16",
        "rule": "bf16 becomes the default only if the 95 % CI of the paired bf16 - fp32 "
        "difference in held-out exact match stays above -2 points",
        "matched": matched,
    }
    return report


def machine(threads: int) -> dict[str, Any]:
    cpu = torch.device("cpu")
    return {
        "cpu": platform.processor() or platform.machine(),
        "bf16_flags": sorted(cpu_flags() & {"amx_bf16", "avx512_bf16", "bf16", "avx512f"}),
        "bf16_native": bf16_native(cpu), "threads": threads, "torch": torch.__version__,
        "cores": os.cpu_count(), "load_average_before": os.getloadavg(),
    }  # fmt: skip


def save(report: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(report, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--acc-steps", type=int, default=800)
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--render", action="store_true", help="only derive and plot the JSON")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    report: dict[str, Any] = json.loads(OUT.read_text()) if OUT.exists() else {}
    if args.render:
        args.skip_timing = args.skip_accuracy = True
    else:
        report["machine"] = machine(args.threads)
    if not args.skip_timing:
        report["timing"] = {name: time_model(name, args.rounds) for name in args.models}
        save(report)
    if not args.skip_accuracy:

        def saved(partial: Any) -> None:
            save(report | {"accuracy": partial})

        report["accuracy"] = accuracy(args.seeds, args.acc_steps, MODES, saved)
    save(derived(report))
    plot(report, OUT.with_suffix(".png"))
    print(json.dumps({k: v["speedup_vs_fp32"] for k, v in report.get("timing", {}).items()}))


if __name__ == "__main__":
    main()
