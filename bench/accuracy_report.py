"""The accuracy study's statistics and Markdown: per cell, every loss against ce.

A cell is (model, task, held-out split). Each loss's seeds are paired with ce's (same
initial weights and data order); per metric: the mean difference, its 95 % confidence
interval, the effect size d_z and a paired t-test, Holm-corrected across the cell's losses.
The verdicts list only differences that survive the correction.
"""

from __future__ import annotations

import itertools
import math
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from accuracy_plan import DEFAULT_WEIGHT, LOSSES, NUMERIC, parse_label, weight_of
from accuracy_stats import holm, mean_std, paired_t_test

METRICS = (
    "exact_match",
    "within_5pct",
    "within_1pct",
    "digit_accuracy",
    "mae",
    "median_rel_error",
    "parse_failure_rate",
)
HIGHER_IS_BETTER = {"exact_match", "within_5pct", "within_1pct", "digit_accuracy"}
LABELS = {
    "exact_match": "exact match",
    "within_5pct": "within 5 %",
    "within_1pct": "within 1 %",
    "digit_accuracy": "digit accuracy",
    "mae": "MAE",
    "median_rel_error": "median rel. error",
    "parse_failure_rate": "parse failures",
}
ALPHA = 0.05


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


def _num(value: Any) -> float:
    """A metric from a run record: JSON null (an undefined mean) reads as NaN."""
    return math.nan if value is None else float(value)


def loss_rank(label: str) -> tuple[int, str]:
    """Losses in the one fixed order, variants right after their loss."""
    name = parse_label(label)[0]
    return (LOSSES.index(name) if name in LOSSES else len(LOSSES), label)


def summarise(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (model, task, split, loss label): mean ± std over seeds, tests vs ce."""
    cells: dict[tuple[str, str, str], dict[str, dict[int, dict[str, float]]]] = {}
    for run in runs:
        for split, scores in run["metrics"].items():
            by_seed = cells.setdefault((run["model"], run["task"], split), {})
            row = {k: _num(v) for k, v in scores.items()}
            by_seed.setdefault(run["loss"], {})[run["seed"]] = {
                **row,
                "step_time_s": _num(run["step_time_s"]),
            }
    rows: list[dict[str, Any]] = []
    for (model, task, split), by_loss in cells.items():
        base = by_loss.get("ce", {})
        cell_rows = []
        for loss in sorted(by_loss, key=loss_rank):
            by_seed = by_loss[loss]
            seeds = sorted(by_seed)
            row: dict[str, Any] = {"model": model, "task": task, "split": split, "loss": loss,
                                   "seeds": seeds}  # fmt: skip
            for metric in METRICS:
                row[metric] = mean_std([by_seed[s].get(metric, math.nan) for s in seeds])
            paired = [s for s in seeds if s in base]
            if loss != "ce" and paired:
                row["vs_ce"] = {
                    m: paired_t_test(
                        [by_seed[s].get(m, math.nan) for s in paired],
                        [base[s].get(m, math.nan) for s in paired],
                    )
                    for m in METRICS
                }
                ratios = [by_seed[s]["step_time_s"] / base[s]["step_time_s"] for s in paired]
                row["time_vs_ce"] = mean_std(ratios)
            cell_rows.append(row)
        # Holm across this cell's losses, one family per metric; the λ variants (a weight
        # override) are a family of their own, so a λ sweep does not dilute the main table.
        families: dict[bool, list[dict[str, Any]]] = {}
        for r in cell_rows:
            if "vs_ce" in r:
                families.setdefault("weight" in parse_label(r["loss"])[1], []).append(r)
        for tested, metric in itertools.product(families.values(), METRICS):
            adjusted = holm([r["vs_ce"][metric]["p"] for r in tested])
            for r, p in zip(tested, adjusted, strict=True):
                r["vs_ce"][metric]["p_holm"] = p
        rows += cell_rows
    return rows


def _fmt(stat: dict[str, float], digits: int = 3) -> str:
    mean, std = _num(stat["mean"]), _num(stat["std"])
    if math.isnan(mean):
        return "n/a"
    text = f"{mean:.{digits}g}"
    if not math.isnan(std):
        text += f" ± {std:.2g}"
    if stat.get("nan"):
        text += f" ({int(stat['nan'])} n/a)"
    return text


def _diff(row: dict[str, Any], metric: str) -> str:
    test = row.get("vs_ce", {}).get(metric)
    if test is None:
        return "—"
    d, lo, hi = _num(test["mean_diff"]), _num(test["ci_low"]), _num(test["ci_high"])
    if math.isnan(lo):
        return "n/a" if math.isnan(d) else f"{d:+.3g}"
    return f"{d:+.3g} [{lo:+.3g}, {hi:+.3g}]"


def _p(row: dict[str, Any], metric: str) -> str:
    test = row.get("vs_ce", {}).get(metric)
    if test is None:
        return "—"
    p, dz = _num(test.get("p_holm")), _num(test["d_z"])
    if math.isnan(p):
        return "n/a"
    mark = " **" if p < ALPHA else ""
    return f"{p:.2g}{mark} (d {dz:+.1f})"


def verdicts(summary: list[dict[str, Any]]) -> list[str]:
    """One line per (cell, loss, metric) difference with Holm-corrected p < 0.05."""
    out = []
    for row in summary:
        for metric, test in row.get("vs_ce", {}).items():
            p = _num(test.get("p_holm"))
            if math.isnan(p) or p >= ALPHA:
                continue
            better = (test["mean_diff"] > 0) == (metric in HIGHER_IS_BETTER)
            out.append(
                f"- {row['task']} ({split_name(row['split'])}, {row['model']}): `{row['loss']}` "
                f"{'helps' if better else 'hurts'} {LABELS[metric]}: {_diff(row, metric)} "
                f"vs ce, p_Holm = {p:.2g}, d_z = {test['d_z']:+.1f}"
            )
    return out or ["- No difference from ce survives Holm's correction."]


def lambda_cells(summary: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Cells with a λ sweep: {(model, task): {"ce": row, loss: {λ: row}}} (interpolate)."""
    swept = {(r["model"], r["task"]) for r in summary if "weight=" in r["loss"]}
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for row in summary:
        cell = (row["model"], row["task"])
        name, overrides = parse_label(row["loss"])
        if cell not in swept or row["split"] != "interpolate" or set(overrides) - {"weight"}:
            continue
        if name == "ce":
            out.setdefault(cell, {})["ce"] = row
        elif name in NUMERIC:
            out.setdefault(cell, {}).setdefault(name, {})[weight_of(row["loss"])] = row
    return out


def lambda_markdown(summary: list[dict[str, Any]]) -> list[str]:
    lines = []
    for (model, task), by_loss in lambda_cells(summary).items():
        weights = sorted({w for name in NUMERIC for w in by_loss.get(name, {})})
        lines += [
            "",
            f"## λ sensitivity: {task} (interpolate), {model} model",
            "",
            f"Exact match (mean over seeds), Δ to ce in brackets, ** Holm p < 0.05; "
            f"ce: {_fmt(by_loss['ce']['exact_match']) if 'ce' in by_loss else 'n/a'}; "
            f"λ = {DEFAULT_WEIGHT:g} is the default (the main table's runs, all their seeds).",
            "",
            "| loss | " + " | ".join(f"λ = {w:g}" for w in weights) + " |",
            "|---|" + "---|" * len(weights),
        ]
        for name in NUMERIC:
            cells = []
            for w in weights:
                row = by_loss.get(name, {}).get(w)
                if row is None:
                    cells.append("—")
                    continue
                test = row.get("vs_ce", {}).get("exact_match", {})
                star = " **" if _num(test.get("p_holm")) < ALPHA else ""
                delta = _num(test.get("mean_diff"))
                cells.append(f"{_num(row['exact_match']['mean']):.3f} ({delta:+.3f}){star}")
            lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return lines


def split_name(split: str) -> str:
    """`interpolate@greedy` (scored with plain greedy decoding) → readable."""
    name, _, decoding = split.partition("@")
    return f"{name}, plain {decoding} decoding" if decoding else name


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    walls = ", ".join(
        f"{'+'.join(i['parts'])} {i['wall_s'] / 60:.0f} min" for i in result.get("invocations", [])
    )
    lines = [
        f"# Accuracy study, scale `{result['scale']}`",
        "",
        f"Parts: {', '.join(result['parts'])}; invocations: {walls}  ",
        f"Last command: `{result['command']}` at commit `{result['commit']}`, "
        f"finished {result['finished']}  ",
        *(
            [f"Tables rendered again from its runs by commit `{result['rendered_by']}`  "]
            if result.get("rendered_by")
            else []
        ),
        f"Machine: {m['cores']} cores, {m['ram_gib']} GiB RAM, {m['cpu']}, Python {m['python']}",
        "",
        "Mean ± std over seeds. Δ: mean paired difference to `ce` (same seeds: same initial "
        "weights and data order) with its 95 % confidence interval; p: paired t-test, "
        "Holm-corrected across the losses of the cell (the λ variants are a family of their "
        "own; ** below 0.05), d: effect size d_z. "
        "Time: training step time relative to `ce`.",
    ]
    for label, tuned in result.get("tuned", {}).items():
        lr = label.endswith(" lr")
        what = f"`ce`'s learning rate ({label[:-3]})" if lr else f"`smmd_tuned` ({label})"
        lines.append(f"{what}: {tuned['config']} from {tuned['detail']}.")
    lines += [
        "",
        "## Verdicts (only what survives the correction)",
        "",
        *verdicts(result["summary"]),
    ]
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in result["summary"]:
        if "weight=" not in row["loss"]:  # the λ sweep has its own table
            groups.setdefault((row["model"], row["task"], row["split"]), []).append(row)
    for (model, task, split), rows in groups.items():
        lines += [
            "",
            f"## {task} ({split_name(split)}), {model} model",
            "",
            "| loss | n | exact match | Δ EM vs ce | p (d) | within 5 % | digit acc. | MAE "
            "| Δ MAE vs ce | p (d) | parse fail | time |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in rows:
            cost = row.get("time_vs_ce")
            lines.append(
                f"| `{row['loss']}` | {len(row['seeds'])} | {_fmt(row['exact_match'])} "
                f"| {_diff(row, 'exact_match')} | {_p(row, 'exact_match')} "
                f"| {_fmt(row['within_5pct'])} | {_fmt(row['digit_accuracy'])} "
                f"| {_fmt(row['mae'])} | {_diff(row, 'mae')} | {_p(row, 'mae')} "
                f"| {_fmt(row['parse_failure_rate'], 2)} | {_fmt(cost, 2) if cost else '1'} |"
            )
    lines += lambda_markdown(result["summary"])
    return "\n".join(lines) + "\n"
