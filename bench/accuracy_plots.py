"""The accuracy study's pictures, next to its JSON:

<stem>.png         bars per cell: each metric's mean ± std over seeds, one colour per loss
<stem>-curves.png  learning curves: held-out exact match and MAE against step, per task
<stem>-lambda.png  exact match and MAE against the weight λ for each numeric loss
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from bench.accuracy_report import LABELS, lambda_cells, loss_rank
from bench.accuracy_studies import NUMERIC, parse_label

BAR_METRICS = ("exact_match", "within_5pct", "digit_accuracy", "mae", "parse_failure_rate")


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colours(labels: list[str]) -> dict[str, str]:
    """One colour per loss label in every panel (ce grey), in the one fixed order."""
    others = [name for name in sorted(set(labels), key=loss_rank) if name != "ce"]
    return {"ce": "0.45", **{name: f"C{i % 10}" for i, name in enumerate(others)}}


def _mean(values: list[Any]) -> float:
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return statistics.fmean(finite) if finite else math.nan


def plot_bars(result: dict[str, Any], path: Path) -> None:
    plt = _plt()
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in result["summary"]:
        if "weight=" not in row["loss"]:
            groups.setdefault(f"{row['task']} {row['split']}\n{row['model']}", []).append(row)
    colour = _colours([r["loss"] for rows in groups.values() for r in rows])
    cols = max(1, len(groups))
    fig, axes = plt.subplots(
        len(BAR_METRICS), cols, figsize=(2.9 * cols, 2.2 * len(BAR_METRICS)), dpi=100,
        squeeze=False,
    )  # fmt: skip
    for c, (title, rows) in enumerate(groups.items()):
        names = [r["loss"] for r in rows]
        for r_i, metric in enumerate(BAR_METRICS):
            ax = axes[r_i][c]
            means = [_mean([r[metric]["mean"]]) for r in rows]
            stds = [
                0.0 if math.isnan(_mean([r[metric]["std"]])) else r[metric]["std"] for r in rows
            ]
            ax.bar(range(len(rows)), means, yerr=stds, capsize=2, color=[colour[n] for n in names])
            ax.set_xticks(range(len(rows)), names, rotation=70, fontsize=6)
            finite = [m for m in means if math.isfinite(m)]
            if metric == "mae" and finite and min(finite) > 0:
                ax.set_yscale("log")
            if c == 0:
                ax.set_ylabel(LABELS[metric], fontsize=8)
            if r_i == 0:
                ax.set_title(title, fontsize=8)
            ax.tick_params(axis="y", labelsize=7)
    fig.suptitle(f"numtune accuracy study ({result['scale']}): mean ± std over seeds", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_curves(result: dict[str, Any], path: Path) -> bool:
    """Mean over seeds of the held-out curve, one line per loss (default weights only)."""
    cells: dict[tuple[str, str], dict[str, dict[int, list[float]]]] = {}
    for run in result["runs"]:
        if "weight=" in run["loss"] or not run.get("curve"):
            continue
        by_loss = cells.setdefault((run["model"], run["task"]), {})
        for point in run["curve"]:
            for metric in ("exact_match", "mae"):
                key = f"{run['loss']}|{metric}"
                by_loss.setdefault(key, {}).setdefault(point["step"], []).append(point[metric])
    if not cells:
        return False
    plt = _plt()
    fig, axes = plt.subplots(2, len(cells), figsize=(3.4 * len(cells), 5.4), dpi=100, squeeze=False)
    labels = sorted({k.split("|")[0] for c in cells.values() for k in c}, key=loss_rank)
    colour = _colours(labels)
    for c, ((model, task), series) in enumerate(sorted(cells.items())):
        for r_i, metric in enumerate(("exact_match", "mae")):
            ax = axes[r_i][c]
            for label in labels:
                points = series.get(f"{label}|{metric}")
                if not points:
                    continue
                steps = sorted(points)
                ax.plot(steps, [_mean(points[s]) for s in steps], marker=".", lw=1.2,
                        color=colour[label], label=label)  # fmt: skip
            if metric == "mae":
                ax.set_yscale("log")
            ax.set_title(f"{task} ({model})" if r_i == 0 else "", fontsize=8)
            ax.set_ylabel(f"held-out {LABELS[metric]}" if c == 0 else "", fontsize=8)
            ax.set_xlabel("step" if r_i == 1 else "", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=6)
    fig.suptitle("Learning curves: mean over seeds", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def plot_lambda(result: dict[str, Any], path: Path) -> bool:
    cells = lambda_cells(result["summary"])
    if not cells:
        return False
    plt = _plt()
    fig, axes = plt.subplots(2, len(cells), figsize=(4.2 * len(cells), 5.4), dpi=100, squeeze=False)
    colour = _colours(list(NUMERIC))
    for c, ((model, task), by_loss) in enumerate(cells.items()):
        for r_i, metric in enumerate(("exact_match", "mae")):
            ax = axes[r_i][c]
            if "ce" in by_loss:
                ax.axhline(_mean([by_loss["ce"][metric]["mean"]]), color="0.45", ls="--", lw=1,
                           label="ce")  # fmt: skip
            for name in NUMERIC:
                rows = by_loss.get(name, {})
                weights = sorted(rows)
                if not weights:
                    continue
                means = [_mean([rows[w][metric]["mean"]]) for w in weights]
                stds = [_mean([rows[w][metric]["std"]]) for w in weights]
                stds = [0.0 if math.isnan(s) else s for s in stds]
                ax.errorbar(weights, means, yerr=stds, marker="o", ms=3, capsize=2, lw=1.2,
                            color=colour[name], label=parse_label(name)[0])  # fmt: skip
            ax.set_xscale("log")
            if metric == "mae":
                ax.set_yscale("log")
            ax.set_title(f"{task} ({model})" if r_i == 0 else "", fontsize=8)
            ax.set_ylabel(f"held-out {LABELS[metric]}", fontsize=8)
            ax.set_xlabel("weight λ" if r_i == 1 else "", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=6)
    fig.suptitle("λ sensitivity: mean ± std over seeds", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def plot_all(result: dict[str, Any], stem: Path) -> list[Path]:
    """Every picture the result supports; returns the files written."""
    written = [stem.with_suffix(".png")]
    plot_bars(result, written[0])
    for suffix, draw in (("-curves", plot_curves), ("-lambda", plot_lambda)):
        path = stem.with_name(stem.name + suffix + ".png")
        if draw(result, path):
            written.append(path)
    return written
