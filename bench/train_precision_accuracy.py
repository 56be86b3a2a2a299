"""bench/train_precision.py's accuracy part and plot: `random:tiny-char` on unit conversions
with emd (examples/char-units-emd.yaml) per seed and precision, through numtune's job loop;
the paired bf16 − fp32 differences over seeds with their 95 % t intervals."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec
from jobs.stats import paired_t
from jobs.train.runner import run_job

BENCH = Path(__file__).resolve().parent
EXAMPLE = BENCH.parent / "examples" / "char-units-emd.yaml"
MARGIN = 0.02  # bf16 may lose at most 2 points of exact match (the bar)


def spec_for(seed: int, steps: int, precision: str) -> JobSpec:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["name"] = f"precision-{precision}-s{seed}".replace("_", "-")
    data["data"]["seed"] = seed
    data["train"].update(  # one evaluation, at the end: the machine's time goes to training
        seed=seed, steps=steps, precision=precision, eval_every=steps, checkpoint_every=steps,
        warmup_steps=min(data["train"]["warmup_steps"], steps - 1),
    )  # fmt: skip
    return JobSpec.model_validate(data)


def trained(spec: JobSpec, storage: str) -> dict[str, Any]:
    """Train `spec` as the service's job does (jobs.train.runner.run_job: Ray Train on the
    local Ray); its final held-out scores, mean step time, last loss and the precision its
    workers said they trained in (the metrics rows' `precision`)."""
    result = run_job(spec, spec.name, storage)
    if result.status != "succeeded":
        raise RuntimeError(f"run {spec.name} {result.status}: {result.detail}")
    rows = [r.as_dict() for r in RunFiles.for_job(spec.name, storage).read_metrics()]
    timed = [r["step_time_s"] for r in rows if r.get("step_time_s") is not None]
    found = [r.get("precision") for r in rows]
    return {
        "exact_match": float(result.metrics["eval_exact_match"]),
        "mae": float(result.metrics["eval_mae"]),
        "step_time_s": statistics.fmean(timed) if timed else None,
        "final_loss": float(result.metrics["loss"]),
        "reported_precision": next((p for p in reversed(found) if p), None),
    }


def paired(runs: list[dict[str, Any]], mode: str, metric: str) -> dict[str, Any]:
    """mode − fp32 over seeds for `metric`: mean, 95 % CI, n (seeds where both ran)."""
    by = {(r["precision"], r["seed"]): r[metric] for r in runs}
    seeds = sorted(s for p, s in by if p == mode and ("fp32", s) in by)
    test = paired_t([by[(mode, s)] for s in seeds], [by[("fp32", s)] for s in seeds])
    return {"n": test.n, "mean_diff": test.mean_diff, "ci95": test.ci, "p": test.p,
            "reason": test.reason}  # fmt: skip


def accuracy(
    seeds: list[int], steps: int, modes: tuple[str, ...], saved: Callable[[Any], None]
) -> dict[str, Any]:
    """Every (seed, mode) run and the paired comparisons; `saved` gets the result so far
    after each run (an interrupted bench keeps what it measured)."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    storage = tempfile.mkdtemp(prefix="numtune-precision-")
    runs: list[dict[str, Any]] = []
    try:
        for seed in seeds:
            for precision in modes:
                spec = spec_for(seed, steps, precision)
                started = time.perf_counter()
                out = trained(spec, storage)
                runs.append({
                    "seed": seed, "precision": precision,
                    "reported_precision": out["reported_precision"],
                    "exact_match": out["exact_match"], "mae": out["mae"],
                    "step_time_s": out["step_time_s"], "wall_s": time.perf_counter() - started,
                    "final_loss": out["final_loss"], "load_average": os.getloadavg(),
                })  # fmt: skip
                print(runs[-1], flush=True)
                saved(summary(runs, steps, modes))
    finally:
        ray.shutdown()
    return summary(runs, steps, modes)


def summary(runs: list[dict[str, Any]], steps: int, modes: tuple[str, ...]) -> dict[str, Any]:
    diffs = {
        mode: {metric: paired(runs, mode, metric) for metric in ("exact_match", "mae")}
        for mode in modes
        if mode != "fp32"
    }
    verdict = {
        mode: bool(d["exact_match"]["ci95"] and d["exact_match"]["ci95"][0] > -MARGIN)
        for mode, d in diffs.items()
    }
    return {
        "setting": f"{EXAMPLE.name}, {steps} steps, 1 thread, held-out split of the units task",
        "runs": runs, "paired_vs_fp32": diffs, "margin_exact_match": MARGIN,
        "matches_fp32_within_margin": verdict,
    }  # fmt: skip


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timing, acc = report.get("timing", {}), report.get("accuracy")
    panels = 1 + len(timing) + bool(acc)
    fig, axes = plt.subplots(
        1, panels, figsize=(3 + 4 * (panels - 1), 4), dpi=110,
        gridspec_kw={"width_ratios": [0.5] + [1] * (panels - 1)},
    )  # fmt: skip
    box = report["machine"]
    axes[0].axis("off")
    text = (
        f"CPU {box['cpu']}\nbf16 flags {box['bf16_flags']}\nthreads {box['threads']}"
        f"\nload average {box['load_average_before'][0]:.1f}"
        "\n\nlabels: fp32 time /\nmode time, median\nof paired rounds"
    )
    axes[0].text(0, 0.5, text, fontsize=9)
    for ax, (name, row) in zip(axes[1:], timing.items(), strict=False):
        modes = list(row["seconds"])
        ax.boxplot([row["seconds"][m] for m in modes], tick_labels=modes)
        for i, mode in enumerate(modes, 1):
            ratio = row["paired_speedup_vs_fp32"][mode]["median"]
            ax.text(i + 0.25, row["median_s"][mode], f"{ratio:.2f}x", fontsize=8)
        ax.set_title(f"{name}: s per step, batch {row['batch'][0]}", fontsize=10)
    if acc:
        ax = axes[-1]
        for seed in sorted({r["seed"] for r in acc["runs"]}):
            pts = [r for r in acc["runs"] if r["seed"] == seed]
            ax.plot([r["precision"] for r in pts], [r["exact_match"] for r in pts], marker="o",
                    label=f"seed {seed}")  # fmt: skip
        ax.set_title("tiny-char units: held-out exact match", fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
