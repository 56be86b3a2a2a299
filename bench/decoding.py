"""Greedy against numeric decodings (expected, median) on held-out arithmetic.

    nice -n 10 .venv/bin/python -m bench.decoding [--steps 250] [--questions 128]
    nice -n 10 .venv/bin/python -m bench.decoding --checkpoint DIR   # skip training

Trains random:tiny-digit on add_or_sub with Smooth-MMD (a one-worker Ray Train job on a
private local Ray; the run is kept under <NUMTUNE_HOME>/cache/bench/decoding and reused
when the same spec is asked again), then answers held-out questions with each decoding through
jobs.infer.NumericPredictor and scores them with jobs.infer.evaluate.score. `mae_common` is the
MAE over the questions every decoding answered with a number, so the three are compared
on the same questions; `vs_greedy` counts the questions a decoding got closer or further.
The greedy run also draws K samples per question: the MAE of their mean and how often the
90 % interval holds the answer. Writes bench/results/decoding.json and .png.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import ray
import torch

from jobs.__main__ import default_job_id
from jobs.data import Example, load_task
from jobs.infer import NumericPredictor, Prediction
from jobs.infer.evaluate import parse_number, score
from jobs.records.models import RunResult
from jobs.records.run_files import RunFiles
from jobs.spec import DataSpec, JobSpec
from jobs.storage.paths import cache_dir
from jobs.train.runner import run_job

RESULTS = Path(__file__).resolve().parent / "results"
DECODINGS = ("greedy", "expected", "median")
log = logging.getLogger("bench.decoding")


def make_spec(steps: int, batch: int, threads: int) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "bench-decoding",
            "model": {"source": "random:tiny-digit", "use_chat_template": False},
            "data": {"modules": ["add_or_sub"], "train_size": 20000, "eval_size": 32},
            "loss": {"name": "smmd", "weight": 0.3, "bandwidth": 2.0},
            "train": {
                "steps": steps,
                "batch_size": batch,
                "lr": 3e-3,
                "warmup_steps": min(50, steps // 10),
                "keep_top_k": 1,
                "log_every": 50,
                "eval_max_new_tokens": 16,
            },
            "scaling": {"num_workers": 1, "cpus_per_worker": threads},
        }
    )


def train(spec: JobSpec, threads: int) -> tuple[Path, float]:
    """The best checkpoint of `spec`: trained now as a one-worker Ray Train job on a
    private local Ray, or found from an earlier run of the same spec. (Ray Train's local
    mode keeps no checkpoint once the loop's temporary folder is gone, so a real run.)"""
    storage = str(cache_dir("bench", "decoding"))
    job_id = default_job_id(spec)
    earlier = RunFiles.for_job(job_id, storage).read_result(RunResult)
    if earlier and earlier.status == "succeeded" and earlier.best_checkpoint:
        log.info("reusing job %s trained earlier for this spec", job_id)
        return Path(earlier.best_checkpoint), 0.0
    start = time.perf_counter()
    # Never join someone else's cluster: a private head, shut down when training ends.
    ray.init(
        address="local",
        num_cpus=threads + 1,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir="/tmp/ntdec",  # its own session files, not the shared /tmp/ray
    )
    try:
        result = run_job(spec, job_id, storage)
    finally:
        ray.shutdown()
    if result.status != "succeeded" or result.best_checkpoint is None:
        raise RuntimeError(f"training failed: {result.reason}: {result.detail}")
    return Path(result.best_checkpoint), time.perf_counter() - start


def errors(preds: list[Prediction], answers: list[float]) -> list[float | None]:
    return [
        None if p.value is None else abs(p.value - t) for p, t in zip(preds, answers, strict=True)
    ]


def evaluate(
    predictor: NumericPredictor, examples: list[Example], samples: int, batch: int
) -> dict[str, Any]:
    prompts = [ex.prompt for ex in examples]
    targets = [ex.answer for ex in examples]
    answers = [parse_number(t) for t in targets]
    if any(a is None for a in answers):
        raise ValueError("every held-out answer of add_or_sub should be a number")
    truth = [float(a) for a in answers if a is not None]
    preds: dict[str, list[Prediction]] = {}
    seconds: dict[str, float] = {}
    for decoding in DECODINGS:
        start = time.perf_counter()
        preds[decoding] = [
            p
            for i in range(0, len(prompts), batch)
            for p in predictor.predict(
                prompts[i : i + batch],
                max_new_tokens=16,
                decoding=decoding,  # type: ignore[arg-type]
                samples=samples if decoding == "greedy" else 0,
                seed=i,
            )
        ]
        seconds[decoding] = time.perf_counter() - start
    errs = {d: errors(preds[d], truth) for d in DECODINGS}
    common = [i for i in range(len(truth)) if all(errs[d][i] is not None for d in DECODINGS)]
    rows: dict[str, Any] = {}
    for d in DECODINGS:
        row: dict[str, Any] = score([p.text for p in preds[d]], targets, "arithmetic")
        common_errors = [errs[d][i] or 0.0 for i in common]
        row["mae_common"] = statistics.fmean(common_errors) if common_errors else None
        diff = [(errs[d][i] or 0.0) - (errs["greedy"][i] or 0.0) for i in common]
        row["vs_greedy"] = {
            "closer": sum(x < 0 for x in diff),
            "further": sum(x > 0 for x in diff),
            "same": sum(x == 0 for x in diff),
        }
        row["changed_text"] = sum(
            a.text != b.text for a, b in zip(preds[d], preds["greedy"], strict=True)
        )
        row["seconds"] = seconds[d]
        rows[d] = row
    sampled = [
        (p, t) for p, t in zip(preds["greedy"], truth, strict=True) if p.expected_value is not None
    ]
    inside = [p.interval[0] <= t <= p.interval[1] for p, t in sampled if p.interval is not None]
    rows["sampled_mean"] = {
        "samples": samples,
        "answered": len(sampled) / len(truth),
        "mae": statistics.fmean(abs((p.expected_value or 0.0) - t) for p, t in sampled)
        if sampled
        else None,
        "interval_coverage": sum(inside) / len(inside) if inside else None,
        "interval_mass": 0.9,
        "mean_parsed_samples": statistics.fmean(p.parsed_samples for p in preds["greedy"]),
    }
    rows["questions"] = len(truth)
    rows["questions_common"] = len(common)
    rows["examples"] = [
        {"prompt": q, "answer": t, **{d: preds[d][i].text for d in DECODINGS}}
        for i, (q, t) in enumerate(zip(prompts[:8], targets[:8], strict=True))
    ]
    return rows


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [
        ("mae_common", "MAE (questions all parse)"),
        ("median_rel_error", "median relative error"),
        ("exact_match", "exact match"),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for ax, (key, title) in zip(axes, metrics, strict=True):
        values = [result["scores"][d][key] for d in DECODINGS]
        values = [math.nan if v is None else v for v in values]
        ax.bar(DECODINGS, values, color=["#777777", "#1f77b4", "#ff7f0e"])
        ax.set_title(title, fontsize=10)
        for x, v in enumerate(values):
            ax.annotate(f"{v:.3g}", (x, v), ha="center", va="bottom", fontsize=8)
    fig.suptitle(
        f"{result['model']} on held-out add_or_sub, {result['train_steps']} steps of "
        f"{result['loss']}; {result['scores']['questions']} questions",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="torch threads for training")
    parser.add_argument("--questions", type=int, default=128)
    parser.add_argument("--samples", type=int, default=8, help="K for the sampled statistics")
    parser.add_argument("--checkpoint", type=Path, help="evaluate this checkpoint, no training")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")
    spec = make_spec(args.steps, args.batch, args.threads)
    ckpt, train_s = (args.checkpoint, 0.0) if args.checkpoint else train(spec, args.threads)
    predictor = NumericPredictor.from_checkpoint(ckpt)
    trained = JobSpec.model_validate_json((ckpt / "spec.json").read_text())
    held = load_task(
        DataSpec.model_validate({**trained.data.model_dump(), "eval_size": args.questions})
    ).eval
    torch.set_num_threads(args.threads)
    scores = evaluate(predictor, held, args.samples, batch=64)
    result = {
        "model": trained.model.source,
        "loss": trained.loss.name,
        "train_steps": trained.train.steps,
        "train_batch": trained.train.batch_size,
        "train_seconds": train_s,
        "checkpoint": str(ckpt),
        "scores": scores,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "torch": torch.__version__,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "decoding.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "decoding.png")
    for d in DECODINGS:
        row = scores[d]
        log.info(
            "%-8s exact %.3f  mae %.4g  mae_common %s  median_rel %.4g  parse_fail %.3f  %s",
            d, row["exact_match"], row["mae"], row["mae_common"], row["median_rel_error"],
            row["parse_failure_rate"], row["vs_greedy"],
        )  # fmt: skip
    log.info("sampled: %s", scores["sampled_mean"])


if __name__ == "__main__":
    main()
