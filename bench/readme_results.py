"""README.md's "Do numeric losses help?" section, rendered from the accuracy study's JSON.

Nothing in the section is typed by hand: `tests/checks/test_readme_results.py` renders it from
`bench/results/accuracy-small.json` and compares it with README.md in full. The primary
family is every test in the table: each numeric loss against `ce` on exact match, on the
held-out questions drawn like the training ones (`interpolate`), at the losses' defaults
(no `[override]` variants). Holm's correction runs over that whole family, so a difference
is called shown only when it survives it; everything else is "not shown".

    python -m bench.readme_results           # print the section
    python -m bench.readme_results --write   # replace it in README.md
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from bench.accuracy_stats import holm
from bench.readme_pretrained import load_runs
from bench.readme_pretrained import render as pretrained
from jobs.stats.power import ALPHA

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "bench" / "results" / "accuracy-small.json"
README = ROOT / "README.md"
HEADING = "## Do numeric losses help?"
LEVELLED = 0.01  # ce has levelled off: < 1 point of exact match over its last 20 % of steps
TASKS = {
    "listsum": "list sums",
    "units": "unit conversions",
    "add": "addition",
    "arithmetic": "DeepMind add_or_sub",
    "bars": "bar values (images)",
}
Row = dict[str, Any]
Cell = tuple[str, str]  # (model label, task)


def _main_rows(summary: list[Row], split: str) -> list[Row]:
    """The rows of one split at the losses' defaults (no `[override]` variant)."""
    return [r for r in summary if r["split"] == split and "[" not in r["loss"]]


def _p(row: Row) -> float:
    value = row.get("vs_ce", {}).get("exact_match", {}).get("p")
    return math.nan if value is None else float(value)


def primary_family(summary: list[Row]) -> list[tuple[Row, float]]:
    """Every defined exact-match test against ce on `interpolate`, with its Holm p over all."""
    tested = [r for r in _main_rows(summary, "interpolate") if r["loss"] != "ce" and _p(r) == _p(r)]
    adjusted = [math.nan if p is None else p for p in holm([_p(r) for r in tested])]
    return list(zip(tested, adjusted, strict=True))


def cell_name(result: dict[str, Any], cell: Cell) -> str:
    source = result["settings"]["models"].get(cell[0], {}).get("source", cell[0])
    trained = " (pretrained)" if source.startswith("bundled:") else ""
    return f"{TASKS.get(cell[1], cell[1])}, `{source}`{trained}"


def _signed(x: float) -> str:
    return f"{x:+.2f}".replace("-", "−")


def _diff(test: dict[str, Any]) -> str:
    return f"{_signed(test['mean_diff'])} [{_signed(test['ci_low'])}, {_signed(test['ci_high'])}]"


def table(result: dict[str, Any], family: list[tuple[Row, float]]) -> list[str]:
    """Losses × cells: ce's own exact match, then each loss's difference to it."""
    cells = list(dict.fromkeys((r["model"], r["task"]) for r, _ in family))
    rows = _main_rows(result["summary"], "interpolate")
    by_key = {(r["model"], r["task"], r["loss"]): r for r in rows}
    adjusted = {id(r): p for r, p in family}
    losses = list(dict.fromkeys(r["loss"] for r, _ in family))
    lines = [
        "| loss | " + " | ".join(cell_name(result, c) for c in cells) + " |",
        "|---|" + "---|" * len(cells),
    ]
    ce = [by_key[(*c, "ce")] for c in cells]
    lines.append(
        "| `ce` (its own score) | "
        + " | ".join(f"{r['exact_match']['mean']:.2f} ± {r['exact_match']['std']:.2f}" for r in ce)
        + " |"
    )
    lines.append("| seeds per loss | " + " | ".join(str(len(r["seeds"])) for r in ce) + " |")
    for loss in losses:
        entries = []
        for cell in cells:
            row = by_key.get((*cell, loss))
            if row is None or id(row) not in adjusted:
                entries.append("—")
                continue
            test = row["vs_ce"]["exact_match"]
            text = _diff(test)
            if adjusted[id(row)] < ALPHA:
                text = f"**{text}**" + (" worse" if test["mean_diff"] < 0 else "")
            entries.append(text)
        lines.append(f"| `{loss}` | " + " | ".join(entries) + " |")
    return lines


def headline(result: dict[str, Any], family: list[tuple[Row, float]]) -> list[str]:
    shown = [(r, p) for r, p in family if p < ALPHA]
    n = len(family)
    best_row, best_p = min(family, key=lambda rp: rp[1])
    where = f"`{best_row['loss']}`, {cell_name(result, (best_row['model'], best_row['task']))}"
    if not shown:
        return [
            f"**Not shown.** None of the {n} primary tests (every numeric loss against `ce`, exact "
            f"match on held-out questions drawn like the training ones, the table's cells) "
            f"survives Holm's correction over all {n} at {ALPHA}: the smallest adjusted p is "
            f"{best_p:.2f} ({where})."
        ]
    # A harm that survives is a harm: the sign decides which side of `ce` each one is on.
    harms = [(r, p) for r, p in shown if r["vs_ce"]["exact_match"]["mean_diff"] < 0]
    gains = [(r, p) for r, p in shown if (r, p) not in harms]

    def named(found: list[tuple[Row, float]]) -> str:
        return ", ".join(
            f"`{r['loss']}` on {cell_name(result, (r['model'], r['task']))}" for r, _ in found
        )

    sides = [f"better than `ce`: {named(gains)}"] if gains else []
    sides += [f"worse than `ce`: {named(harms)}"] if harms else []
    return [
        f"**{len(shown)} of the {n} primary tests survive Holm's correction over all {n} at "
        f"{ALPHA}** (bold in the table): " + "; ".join(sides) + ". Every other difference is "
        "not shown."
    ]


def largest(result: dict[str, Any], family: list[tuple[Row, float]], k: int = 3) -> str:
    top = sorted(family, key=lambda rp: -rp[0]["vs_ce"]["exact_match"]["mean_diff"])[:k]
    parts = [
        f"`{r['loss']}` on {cell_name(result, (r['model'], r['task']))} "
        f"{_diff(r['vs_ce']['exact_match'])} (p = {_p(r):.3f} alone, {p:.2f} after Holm)"
        for r, p in top
    ]
    verdict = "shown" if top[0][1] < ALPHA else "not shown"
    return f"- The largest differences, {verdict}: " + "; ".join(parts) + "."


def _mean_at(curves: list[list[Row]], step: int) -> float:
    """Mean exact match over seeds at one evaluation step of the learning curves."""
    return sum(next(p["exact_match"] for p in c if p["step"] == step) for c in curves) / len(curves)


def ce_still_learning(result: dict[str, Any], cells: list[Cell]) -> str | None:
    """Cells where ce's mean exact match rose by ≥ LEVELLED over its last 20 % of steps."""
    climbing = []
    for model, task in cells:
        curves = [
            r["curve"]
            for r in result["runs"]
            if (r["model"], r["task"], r["loss"]) == (model, task, "ce") and r.get("curve")
        ]
        if not curves:
            continue
        last = curves[0][-1]["step"]
        mark = max(p["step"] for p in curves[0] if p["step"] <= 0.8 * last)
        at = {s: _mean_at(curves, s) for s in (mark, last)}
        if at[last] - at[mark] >= LEVELLED:
            climbing.append(
                f"{cell_name(result, (model, task))} {at[mark]:.2f} → {at[last]:.2f} "
                f"(steps {mark}–{last})"
            )
    if not climbing:
        return None
    return (
        "- `ce` had not levelled off where it was stopped (mean exact match over its last 20 % "
        "of steps): " + "; ".join(climbing) + ". Part of a difference there may be faster "
        "learning rather than a better end point."
    )


def one_seed_cells(result: dict[str, Any]) -> list[str]:
    """Cells whose losses have a single seed: no test is possible, so nothing is shown."""
    out = []
    rows = _main_rows(result["summary"], "interpolate")
    for model, task in dict.fromkeys((r["model"], r["task"]) for r in rows):
        cell = [r for r in rows if (r["model"], r["task"]) == (model, task)]
        if max(len(r["seeds"]) for r in cell) > 1:
            continue
        steps = result["settings"]["models"].get(model, {}).get("steps", {}).get(task)
        scores = ", ".join(f"`{r['loss']}` {r['exact_match']['mean']:.2f}" for r in cell)
        out.append(
            f"- {cell_name(result, (model, task))}"
            + (f", {steps} steps" if steps else "")
            + f": one seed per loss ({scores}): no test is possible, so neither a gain nor its "
            "absence is shown."
        )
    return out


def extrapolation(result: dict[str, Any]) -> str:
    rows = _main_rows(result["summary"], "extrapolate")
    best = max(rows, key=lambda r: r["exact_match"]["mean"])
    best_ce = max((r for r in rows if r["loss"] == "ce"), key=lambda r: r["exact_match"]["mean"])
    return (
        "- Beyond the training range (`extrapolate`: longer lists, bigger numbers) the best mean "
        f"exact match of any loss in any cell is {best['exact_match']['mean']:.3f} "
        f"(`{best['loss']}`, {cell_name(result, (best['model'], best['task']))}); `ce`'s best "
        f"is {best_ce['exact_match']['mean']:.3f}."
    )


def step_cost(result: dict[str, Any]) -> str:
    rows = [r for r in _main_rows(result["summary"], "interpolate") if r.get("time_vs_ce")]
    lo = min(rows, key=lambda r: r["time_vs_ce"]["mean"])
    hi = max(rows, key=lambda r: r["time_vs_ce"]["mean"])

    def at(r: Row) -> str:
        return f"`{r['loss']}` on {cell_name(result, (r['model'], r['task']))}"

    return (
        f"- A numeric loss's training step took {lo['time_vs_ce']['mean']:.2f}× ({at(lo)}) to "
        f"{hi['time_vs_ce']['mean']:.2f}× ({at(hi)}) `ce`'s, mean over seeds."
    )


def provenance(result: dict[str, Any]) -> str:
    runs = result["runs"]
    with_commit = sum(1 for r in runs if r.get("commit"))
    both = sum(1 for r in runs if any("@" in split for split in r["metrics"]))
    tuned = ", ".join(f"`{k}`" for k in result.get("tuned", {}))
    return (
        f"- How it was run: {with_commit} of {len(runs)} runs record the commit that produced "
        f"them (the file records `{result['commit'][:12]}`, its last invocation's); {both} runs "
        "were scored with both number-first and plain greedy decoding, the rest number-first "
        f"only. `smmd_tuned`'s bandwidth and weight come from a sweep on a validation split "
        f"({tuned}); `ce`'s learning rate was not tuned."
    )


def render(result: dict[str, Any]) -> str:
    family = primary_family(result["summary"])
    cells = list(dict.fromkeys((r["model"], r["task"]) for r, _ in family))
    bullets = [
        largest(result, family),
        ce_still_learning(result, cells),
        *one_seed_cells(result),
        extrapolation(result),
        step_cost(result),
        provenance(result),
    ]
    lines = [
        HEADING,
        "",
        "<!-- Generated by bench/readme_results.py from bench/results/pretrained-runs/ and "
        "bench/results/accuracy-small.json; a test compares it with this section. Do not edit "
        "by hand. -->",
        "",
        *pretrained(*load_runs()),
        "### Small models from scratch, and earlier pilots (`accuracy-small.json`)",
        "",
        *headline(result, family),
        "",
        "Exact match against `ce`: mean paired difference over seeds with its 95 % confidence "
        "interval (bold: survives Holm over the whole table). `random:` models are small and "
        "trained from scratch, `bundled:` ones pretrained and fine-tuned; every loss gets the "
        f"same data, seeds and schedule, on {result['machine']['cores']} CPU cores.",
        "",
        *table(result, family),
        "",
        *(b for b in bullets if b),
        "",
        "Every cell, metric and p-value: `bench/results/accuracy-small.md`, and the "
        "documentation's measured results.",
        "",
    ]
    return "\n".join(lines)


def section_of(readme: str, heading: str = HEADING) -> str:
    """README.md's section from its heading up to the blank line before the next heading."""
    start = readme.index(heading + "\n")
    end = readme.find("\n\n## ", start)
    return readme[start : len(readme) if end < 0 else end + 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--write", action="store_true", help="replace the section in README.md")
    args = parser.parse_args()
    section = render(json.loads(STUDY.read_text()))
    if not args.write:
        print(section, end="")
        return
    readme = README.read_text()
    README.write_text(readme.replace(section_of(readme), section))


if __name__ == "__main__":
    main()
