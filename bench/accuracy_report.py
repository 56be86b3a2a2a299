"""The accuracy table's summary, Markdown, PNG and the machine/commit it came from."""

from __future__ import annotations

import math
import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accuracy_stats import mean_std, paired_t_test

METRICS = ("exact_match", "mae", "median_rel_error", "parse_failure_rate")
LABELS = {
    "exact_match": "exact match",
    "mae": "MAE",
    "median_rel_error": "median rel. error",
    "parse_failure_rate": "parse failures",
}


def machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    with open("/proc/cpuinfo", encoding="utf-8") as info:  # Linux: the real model name
        for line in info:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cores": os.cpu_count(),
        "ram_gib": round(ram / 2**30, 1),
        "cpu": model,
        "python": platform.python_version(),
    }


def git_commit(repo: Path) -> str:
    """HEAD's commit, with "+dirty" when the working tree differs from it."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError) as error:
        return f"unknown ({error})"
    return head + ("+dirty" if dirty else "")


def summarise(runs: list[dict[str, Any]], order: Sequence[str]) -> list[dict[str, Any]]:
    """One row per (tokenizer, task, split, loss): mean ± std over seeds, paired test vs ce.

    Cells come in the order of the runs; losses in `order` within each cell (runs finish
    in any order, and every table and plot panel must list the losses alike)."""
    cells: dict[tuple[str, str, str], dict[str, dict[int, dict[str, Any]]]] = {}
    for run in runs:
        for split, scores in run["metrics"].items():
            key = (run["tokenizer"], run["task"], split)
            cells.setdefault(key, {}).setdefault(run["loss"], {})[run["seed"]] = {
                **scores,
                "step_time_s": run["step_time_s"],
            }
    rank = {name: i for i, name in enumerate(order)}
    rows = []
    for (tokenizer, task, split), by_loss in cells.items():
        base = by_loss.get("ce", {})
        for loss in sorted(by_loss, key=lambda name: (rank.get(name, len(rank)), name)):
            by_seed = by_loss[loss]
            seeds = sorted(by_seed)
            row: dict[str, Any] = {
                "tokenizer": tokenizer,
                "task": task,
                "split": split,
                "loss": loss,
                "seeds": seeds,
            }
            for metric in METRICS:
                row[metric] = mean_std([by_seed[s][metric] for s in seeds])
            paired = [s for s in seeds if s in base]  # same seeds: same init and data order
            if loss != "ce" and paired:
                row["vs_ce"] = {
                    m: paired_t_test([by_seed[s][m] for s in paired], [base[s][m] for s in paired])
                    for m in METRICS
                }
                ratios = [by_seed[s]["step_time_s"] / base[s]["step_time_s"] for s in paired]
                row["time_vs_ce"] = mean_std(ratios)
            rows.append(row)
    return rows


def _fmt(stat: dict[str, float], digits: int = 3) -> str:
    if math.isnan(stat["mean"]):
        return "n/a"
    text = f"{stat['mean']:.{digits}g}"
    if not math.isnan(stat["std"]):
        text += f" ± {stat['std']:.2g}"
    if stat.get("nan"):
        text += f" ({int(stat['nan'])} n/a)"
    return text


def _p(row: dict[str, Any], metric: str) -> str:
    test = row.get("vs_ce", {}).get(metric)
    if test is None:
        return "—"
    return "n/a" if math.isnan(test["p"]) else f"{test['p']:.2g}"


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        f"# Accuracy table, scale `{result['scale']}`",
        "",
        f"Command: `{result['command']}`  ",
        f"Commit: `{result['commit']}`; finished {result['finished']} after "
        f"{result['wall_s'] / 60:.1f} min  ",
        *(
            [f"Tables rendered again from its runs by commit `{result['rendered_by']}`  "]
            if result.get("rendered_by")
            else []
        ),
        f"Machine: {m['cores']} cores, {m['ram_gib']} GiB RAM, {m['cpu']}, Python {m['python']}  ",
        f"Settings: {result['settings_text']}",
        "",
        "Mean ± std over seeds. p: two-sided paired t-test against `ce` on the same seeds "
        "(same initial weights and data order); n/a where the differences have no spread. "
        "Time: mean training step time relative to `ce` (paired by seed).",
    ]
    for tokenizer, tuned in result.get("tuned", {}).items():
        lines.append(f"`smmd_tuned` ({tokenizer}): {tuned['config']} from {tuned['detail']}.")
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in result["summary"]:
        groups.setdefault((row["tokenizer"], row["task"], row["split"]), []).append(row)
    for (tokenizer, task, split), rows in groups.items():
        lines += [
            "",
            f"## {task} ({split}), {tokenizer} tokenizer",
            "",
            "| loss | seeds | exact match | MAE | median rel. error | parse failures "
            "| p (EM) | p (MAE) | p (rel.) | time vs ce |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in rows:
            cost = row.get("time_vs_ce")
            lines.append(
                f"| `{row['loss']}` | {len(row['seeds'])} | {_fmt(row['exact_match'])} "
                f"| {_fmt(row['mae'])} | {_fmt(row['median_rel_error'])} "
                f"| {_fmt(row['parse_failure_rate'])} | {_p(row, 'exact_match')} "
                f"| {_p(row, 'mae')} | {_p(row, 'median_rel_error')} "
                f"| {_fmt(cost, 2) if cost else '1'} |"
            )
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    """Bars with std error bars: one row of panels per metric, one column per table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[str, list[dict[str, Any]]] = {}
    for row in result["summary"]:
        groups.setdefault(f"{row['task']} {row['split']}\n{row['tokenizer']}", []).append(row)
    # One colour per loss in every panel (ce grey), in the order the summary lists them.
    losses = list(dict.fromkeys(row["loss"] for row in result["summary"] if row["loss"] != "ce"))
    colour = {"ce": "0.55", **{name: f"C{i}" for i, name in enumerate(losses)}}
    cols = max(1, len(groups))
    fig, axes = plt.subplots(
        len(METRICS), cols, figsize=(3.2 * cols, 2.4 * len(METRICS)), dpi=110, squeeze=False
    )
    for c, (title, rows) in enumerate(groups.items()):
        names = [r["loss"] for r in rows]
        for r_i, metric in enumerate(METRICS):
            ax = axes[r_i][c]
            means = [r[metric]["mean"] for r in rows]
            stds = [0.0 if math.isnan(r[metric]["std"]) else r[metric]["std"] for r in rows]
            ax.bar(range(len(rows)), means, yerr=stds, capsize=3, color=[colour[n] for n in names])
            ax.set_xticks(range(len(rows)), names, rotation=60, fontsize=7)
            finite = [m for m in means if math.isfinite(m)]
            if metric == "mae" and finite and min(finite) > 0:
                ax.set_yscale("log")
            if c == 0:
                ax.set_ylabel(LABELS[metric], fontsize=8)
            if r_i == 0:
                ax.set_title(title, fontsize=8)
            ax.tick_params(axis="y", labelsize=7)
    fig.suptitle(
        f"numtune accuracy ({result['scale']}): mean ± std over seeds, commit "
        f"{result['commit'][:10]}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
