"""The accuracy study's Markdown: per cell, every loss against ce.

A cell is (model, task, held-out split). Each loss's seeds are paired with ce's (same
initial weights and data order); the statistics are accuracy_stats.py's (jobs.stats): the
primary tests (exact match on the interpolation split, main losses) are Holm-corrected as
one family over the whole table (their TOST p too); the registered secondary tests are
Benjamini–Hochberg over the table, every other test exploratory (raw p). The verdicts state
every primary test's outcome and what it rests on (ce tuned? still rising?), and the
secondary differences that survive BH, labelled secondary.
"""

from __future__ import annotations

import math
from typing import Any

from bench.accuracy_stats import MARGINS, REGISTERED, footings, summarise_table
from bench.accuracy_studies import (
    DEFAULT_WEIGHT,
    LOSSES,
    NUMERIC,
    PRETRAINED_ARMS,
    parse_label,
    weight_of,
)
from jobs.calibration import per_arm
from jobs.stats import higher_is_better
from jobs.stats.power import ALPHA
from jobs.stats.verdict import LABELS

PRIMARY_SPLIT = "interpolate"


def _num(value: Any) -> float:
    """A figure from the JSON: null (undefined) reads as NaN."""
    return math.nan if value is None else float(value)


def loss_rank(label: str) -> tuple[int, str]:
    """Losses in the one fixed order, variants right after their loss."""
    name = parse_label(label)[0]
    return (LOSSES.index(name) if name in LOSSES else len(LOSSES), label)


def primary_family(split: str, loss: str) -> bool:
    """The protocol's primary tests: exact match on the interpolation split, losses at
    their defaults or as bench/protocol.md declares an arm (`del[weight=1]`); variants such
    as a λ sweep or the "before" rows are secondary."""
    return split == PRIMARY_SPLIT and (not parse_label(loss)[1] or loss in PRETRAINED_ARMS)


def summarise(runs: list[dict[str, Any]], scale: str) -> list[dict[str, Any]]:
    """One row per (model, task, split, loss label): mean ± std over seeds, tests vs ce."""

    # bench/protocol.md's secondary family: its registered metrics on its primary rows (the
    # small study registered none: every other test of its table is secondary).
    def registered(split: str, loss: str, metric: str) -> bool:
        return scale != "pretrained" or (primary_family(split, loss) and metric in REGISTERED)

    return summarise_table(runs, rank=loss_rank, primary=primary_family, margin=MARGINS[scale],
                           secondary=registered, footing=footings(runs, scale))  # fmt: skip


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
    """Δ [t CI], and ⟨bootstrap CI⟩ when the runs kept their answers."""
    test = row.get("vs_ce", {}).get(metric)
    if test is None:
        return "—"
    d, lo, hi = _num(test["mean_diff"]), _num(test["ci_low"]), _num(test["ci_high"])
    if math.isnan(lo):
        return "n/a" if math.isnan(d) else f"{d:+.3g}"
    text = f"{d:+.3g} [{lo:+.3g}, {hi:+.3g}]"
    boot_lo, boot_hi = _num(test.get("ci_boot_low")), _num(test.get("ci_boot_high"))
    if not math.isnan(boot_lo):
        text += f" ⟨{boot_lo:+.3g}, {boot_hi:+.3g}⟩"
    return text


def adjusted(test: dict[str, Any]) -> tuple[str, float]:
    """("Holm", p) for a primary test, ("BH", q) for a secondary one, ("raw", p) for an
    exploratory one (outside any correction)."""
    if "p_holm" in test:
        return "Holm", _num(test["p_holm"])
    if test.get("exploratory"):
        return "raw", _num(test.get("p"))
    return "BH", _num(test.get("p_bh"))


def _p(row: dict[str, Any], metric: str) -> str:
    test = row.get("vs_ce", {}).get(metric)
    if test is None:
        return "—"
    kind, p = adjusted(test)
    if math.isnan(p):
        return "n/a"
    mark = " **" if p < ALPHA and kind != "raw" else ""
    same = " ≡" if test.get("equivalent") and kind != "raw" else ""  # no claim unadjusted
    prefix = {"BH": "q ", "raw": "p "}.get(kind, "")
    return f"{prefix}{p:.2g}{mark}{same} (d {_num(test['d_z']):+.1f})"


def _cell(row: dict[str, Any]) -> str:
    return f"{row['task']} ({split_name(row['split'])}, {row['model']})"


def verdicts(summary: list[dict[str, Any]]) -> list[str]:
    """Every primary test's verdict, then the secondary differences that survive BH."""
    primary = [row for row in summary if "verdict" in row]
    ps = [_num(row["vs_ce"]["exact_match"]["p_holm"]) for row in primary]
    best = min((p for p in ps if not math.isnan(p)), default=math.nan)
    secondary, tested = [], 0
    for row in summary:
        for metric, test in row.get("vs_ce", {}).items():
            q = _num(test.get("p_bh"))
            tested += not math.isnan(q)
            if math.isnan(q) or q >= ALPHA:
                continue
            better = (test["mean_diff"] > 0) == higher_is_better(metric)
            secondary.append(
                f"- secondary: {_cell(row)}: `{row['loss']}` {'helps' if better else 'hurts'} "
                f"{LABELS[metric]}: {_diff(row, metric)} vs ce, q_BH = {q:.2g}"
            )
    return [
        f"Primary: exact match on the interpolation split, {sum(not math.isnan(p) for p in ps)} "
        f"tests Holm-corrected as one family (smallest p_Holm = {best:.2g}); equivalence: "
        f"TOST at ±{margin_of(summary):g}.",
        "",
        *(f"- {_cell(row)}: {row['verdict']}" for row in primary),
        "",
        f"Secondary ({tested} tests, Benjamini–Hochberg; only q < 0.05 listed; the pretrained "
        f"protocol registered {', '.join(LABELS[m] for m in REGISTERED)} on its primary rows, "
        "and every other test of its tables is exploratory: raw p, no correction):",
        "",
        *(secondary or ["- none survives"]),
    ]


def margin_of(summary: list[dict[str, Any]]) -> float:
    """The TOST margin the table's primary tests were run with."""
    margins = {row["vs_ce"]["exact_match"]["margin"] for row in summary if "verdict" in row}
    if len(margins) != 1:
        raise ValueError(f"the primary tests have margins {margins or 'none'}, not one")
    return float(margins.pop())


def bootstrap_note(summary: list[dict[str, Any]]) -> str:
    kept = any(
        not math.isnan(_num(t.get("ci_boot_low")))
        for row in summary
        for t in row.get("vs_ce", {}).values()
    )
    if kept:
        return "⟨ ⟩: 95 % bootstrap interval over questions × seeds (paired)."
    return (
        "Bootstrap over questions × seeds: absent — the runs of this JSON did not keep their "
        "per-question answers (runs since the bench stores them do)."
    )


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
            "Exact match (mean over seeds), Δ to ce in brackets, ** adjusted p < 0.05 (the "
            "default λ: Holm, primary; the other λ: BH q, secondary); "
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
                star = " **" if adjusted(test)[1] < ALPHA else ""
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
        "weights and data order) with its 95 % confidence interval (paired t). p: the paired "
        "t-test's p adjusted over the whole table: Holm for the primary tests (exact match, "
        "interpolation split, losses at their defaults), `q` Benjamini–Hochberg for every "
        f"other test (secondary); ** below {ALPHA:g}; ≡: shown equivalent to `ce` within "
        f"±{margin_of(result['summary']):g} (TOST); d: effect size d_z. Time: training step "
        "time relative to `ce`.",
        "",
        bootstrap_note(result["summary"]),
    ]
    for label, tuned in result.get("tuned", {}).items():
        lr = label.endswith(" lr")
        what = f"`ce`'s learning rate ({label[:-3]})" if lr else f"`smmd_tuned` ({label})"
        lines.append(f"{what}: {tuned['config']} from {tuned['detail']}.")
    lines += [
        "",
        "## Verdicts",
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
        lines += intervals_markdown(rows)
    lines += lambda_markdown(result["summary"])
    return "\n".join(lines) + "\n"


def intervals_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The cell's calibrated 90 % intervals per loss, measured out of sample (runs that
    calibrated their final weights); nothing for runs from before the bench did."""
    shown = [row for row in rows if row.get("intervals")]
    if not shown:
        return []
    lines = [
        "",
        "90 % intervals, calibrated as a version's are and measured on questions each fold's "
        "fit did not see (means over runs; lower width and score are better):",
        "",
        "| loss | runs | coverage | median width ÷ \\|answer\\| | Δ vs ce | p | interval score "
        "| Δ vs ce | p | |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in shown:
        i, width, score = row["intervals"], per_arm.WIDTH, per_arm.SCORE
        lines.append(
            f"| `{row['loss']}` | {i['runs']} | {i['coverage']:.3f} "
            f"| {i['relative_width_median']:.3g} | {_diff(row, width)} | {_p(row, width)} "
            f"| {i['winkler_mean']:.4g} | {_diff(row, score)} | {_p(row, score)} "
            f"| {'wide' if i['wide'] else ''} |"
        )
    return lines
