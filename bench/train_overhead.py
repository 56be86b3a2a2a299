"""Step time of a Ray Train job against a bare single-process torch loop, same model and batch.

    .venv/bin/python -m bench.train_overhead [--model random:tiny-digit] [--steps 30]

The bare loop is the worker loop's core with nothing around it: the same tokenised data,
the same fused loss, AdamW, no Ray. The Ray figure is the median `step_time_s` the job
reports (it includes the per-report barrier). Goal: ratio <= 1.10 at one worker.
Writes bench/results/train_overhead.json and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from jobs.data import load_task
from jobs.data.tokenize import encode_example
from jobs.losses import BatchCounts, NumericVocab, build_loss, shift_labels
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import JobSpec
from jobs.train.loop import micro_batches

RESULTS = Path(__file__).resolve().parent / "results"


def make_spec(model: str, steps: int, batch: int, log_every: int = 1) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "overhead",
            "model": {"source": model, "use_chat_template": False},
            "data": {"train_size": max(256, batch * 4), "eval_size": 4, "max_length": 96},
            "loss": {"name": "smmd"},
            "train": {
                "steps": steps,
                "batch_size": batch,
                "lr": 1e-4,
                "schedule": "constant",
                "log_every": log_every,
            },
            "scaling": {"num_workers": 1, "cpus_per_worker": float(os.cpu_count() or 1)},
        }
    )


def bare_loop(spec: JobSpec, warmup: int) -> list[float]:
    """Seconds per optimizer step of the plain loop (after `warmup` steps)."""
    torch.manual_seed(spec.train.seed)
    model, tokenizer = load_model_and_tokenizer(spec.model, seed=spec.train.seed)
    vocab = NumericVocab.from_tokenizer(tokenizer)
    loss_fn = build_loss(spec.loss, vocab)
    task = load_task(spec.data)
    rows = [
        encode_example(tokenizer, ex, spec.data.max_length, spec.model.use_chat_template)
        for ex in task.train
    ]
    batches = micro_batches(rows, spec.train.batch_size, tokenizer.pad_token_id, spec.train.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.train.lr)
    times = []
    for _ in range(spec.train.steps or 0):
        t0 = time.perf_counter()
        batch = next(batches)
        labels = shift_labels(batch["labels"])
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        out = loss_fn(logits, labels, num_items_in_batch=BatchCounts.of([labels], vocab))
        out.total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        float(out.total.detach())  # the job reads its loss every step too
        times.append(time.perf_counter() - t0)
    return times[warmup:]


def ray_job(spec: JobSpec, warmup: int) -> list[float]:
    """Per-step times the Ray Train job reports, from a fresh `python -m jobs run`."""
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp, "spec.json")
        spec_file.write_text(spec.model_dump_json())
        storage = Path(tmp, "storage")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "jobs",
                "run",
                str(spec_file),
                "--job-id",
                "overhead",
                "--storage",
                str(storage),
            ],
            check=True,
        )
        lines = (storage / "runs/overhead/metrics.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    # Evaluation steps carry generation time: leave them out, like the bare loop does.
    timed = [r["step_time_s"] for r in rows if "step_time_s" in r and "eval_mae" not in r]
    return timed[warmup // max(1, spec.train.log_every) :]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="random:tiny-digit")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--log-every", type=int, default=1, help="report every N steps")
    args = parser.parse_args()
    # At Ray's default health-check interval (2 s) a report can block ~2 s; 0.2 s polls
    # the workers often.
    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")
    interval = os.environ["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"]
    spec = make_spec(args.model, args.steps, args.batch, args.log_every)

    bare = statistics.median(bare_loop(spec, args.warmup))
    ray = statistics.median(ray_job(spec, args.warmup))
    result: dict[str, Any] = {
        "model": args.model,
        "batch_size": args.batch,
        "steps": args.steps,
        "log_every": args.log_every,
        "ray_train_health_check_interval_s": float(interval),
        "bare_step_s": bare,
        "ray_step_s": ray,
        "ratio": ray / bare,
        "goal_ratio": 1.10,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "torch": torch.__version__,
    }
    RESULTS.mkdir(exist_ok=True)
    name = f"train_overhead-{args.model.replace(':', '_')}-log{args.log_every}-hc{interval}"
    # Not Path.with_suffix: "hc0.2" would lose its ".2".
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2))
    plot(result, RESULTS / f"{name}.png")
    print(json.dumps(result, indent=2))


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5), dpi=120)
    ax.bar(["bare torch loop", "Ray Train job"], [result["bare_step_s"], result["ray_step_s"]])
    ax.set_ylabel("median seconds per step")
    ax.set_title(f"{result['model']}, batch {result['batch_size']}: ratio {result['ratio']:.2f}")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
