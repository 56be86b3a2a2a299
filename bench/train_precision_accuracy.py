"""bench/train_precision.py's accuracy part and plot: `random:tiny-char` on unit conversions
with emd (examples/char-units-emd.yaml) per seed and precision, through numtune's job loop;
the paired bf16 − fp32 differences over seeds with their 95 % t intervals."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))  # accuracy_runs, also when loaded by file path

from accuracy_runs import run_one  # noqa: E402

from jobs.records.run_files import RunFiles  # noqa: E402
from jobs.spec import JobSpec  # noqa: E402
from jobs.stats import paired_t  # noqa: E402

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


def reported_precision(storage: str, job_id: str) -> str | None:
    """What the run's workers said they trained in (the metrics rows' `precision`)."""
    rows = RunFiles.for_job(job_id, storage).read_metrics()
    found = [r.as_dict().get("precision") for r in rows]
    return next((p for p in reversed(found) if p), None)


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
                out = run_one(spec.model_dump_json(), spec.name, storage, [])
                scores = out["metrics"][spec.data.eval_split]
                runs.append({
                    "seed": seed, "precision": precision,
                    "reported_precision": reported_precision(storage, spec.name),
                    "exact_match": scores["exact_match"], "mae": scores["mae"],
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
