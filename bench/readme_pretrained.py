"""README.md's pretrained rows, rendered by bench/protocol.md's rules from the study's runs.

The runs are the records in bench/results/pretrained-runs/ (one JSON per finished run, the
same that `accuracy.py --scale pretrained` writes as it goes). A cell counts only when every
arm has every protocol seed; the primary family (Holm) is every arm × complete cell; the
score is the last step's. Where `ce` rose by at least 0.01 exact match between steps 120 and
150 the cell is also tested at step 120, from the learning curves (no bootstrap there: only
the final answers are kept). `python -m bench.readme_results --write` puts this into README.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.accuracy_report import PRIMARY_SPLIT, summarise
from bench.accuracy_stats import MARGINS
from bench.accuracy_studies import PRETRAINED_ARMS
from jobs.stats.power import ALPHA

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "bench" / "results" / "pretrained-runs"
SUMMARY = "summary.json"  # a records folder's summary (bench/readme_protocol2.py), not a run
SEEDS = (0, 1, 2, 3, 4)  # bench/protocol.md: fixed before any run
CELLS = ("units", "jsonl")  # the protocol's tasks, in its order (fallbacks: listsum, add)
LEVELLED = 0.01
TASK_NAMES = {
    "units": "unit conversions",
    "jsonl": "word problems (JSONL)",
    "listsum": "list sums",
    "add": "addition",
}
Run = dict[str, Any]


def load_runs(folder: Path = RECORDS) -> tuple[list[Run], list[Run]]:
    """(evaluation runs, sweeps) kept in the records folder (beside them, a folder's
    summary.json is not a run)."""
    runs, sweeps = [], []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.name == SUMMARY:
            continue
        record = json.loads(path.read_text())
        if path.name.startswith("sweep-"):  # sweep-<name>-<task>-<digest>.json
            name, task, _ = path.stem.removeprefix("sweep-").rsplit("-", 2)
            record = {**record, "sweep": "lr" if "-lr-" in name else "smmd", "task": task}
            sweeps.append(record)
        else:
            runs.append(record)
    return runs, sweeps


def complete_tasks(runs: list[Run]) -> list[str]:
    """Tasks where every protocol arm has every protocol seed."""
    have = {(r["task"], r["loss"], r["seed"]) for r in runs}
    tasks = dict.fromkeys(r["task"] for r in runs)
    return [t for t in tasks if all((t, a, s) in have for a in PRETRAINED_ARMS for s in SEEDS)]


def at_step(run: Run, step: int) -> Run:
    """The run scored at an earlier evaluation of its curve (same held-out questions)."""
    point = next(p for p in run["curve"] if p["step"] == step)
    scores = {k: v for k, v in point.items() if k != "step"}
    return {
        **{k: v for k, v in run.items() if k not in ("predictions", "targets")},
        "metrics": {PRIMARY_SPLIT: scores},
    }


def ce_curve(runs: list[Run], task: str) -> dict[int, float]:
    """ce's mean exact match over seeds at each evaluation step."""
    curves = [r["curve"] for r in runs if (r["task"], r["loss"]) == (task, "ce")]
    steps = [p["step"] for p in curves[0]]
    return {
        s: sum(next(p["exact_match"] for p in c if p["step"] == s) for c in curves) / len(curves)
        for s in steps
    }


def _signed(x: float) -> str:
    return f"{x:+.3f}".replace("-", "−")


def harmful(test: dict[str, Any]) -> bool:
    """A primary test that survives Holm with the arm below `ce`: a harm, never a gain."""
    p_holm = test.get("p_holm")
    return p_holm is not None and p_holm < ALPHA and test["mean_diff"] < 0


def _cell_text(row: dict[str, Any]) -> str:
    test = row["vs_ce"]["exact_match"]
    text = f"{_signed(test['mean_diff'])} [{_signed(test['ci_low'])}, {_signed(test['ci_high'])}]"
    p_holm = test.get("p_holm")
    text += f", p_Holm {p_holm:.2g}" if p_holm is not None and p_holm == p_holm else ""
    if test.get("ci_boot_low") == test.get("ci_boot_low"):  # not NaN: answers were kept
        text += f" ⟨{_signed(test['ci_boot_low'])}, {_signed(test['ci_boot_high'])}⟩"
    if test.get("equivalent"):
        text += " ≡"
    if p_holm is not None and p_holm < ALPHA:
        text = f"**{text}**" + (" worse" if harmful(test) else "")
    return text


def table(summary: list[dict[str, Any]], tasks: list[str]) -> list[str]:
    rows = {(r["task"], r["loss"]): r for r in summary if r["split"] == PRIMARY_SPLIT}
    lines = [
        "| arm | " + " | ".join(TASK_NAMES.get(t, t) for t in tasks) + " |",
        "|---|" + "---|" * len(tasks),
    ]
    ce = [rows[(t, "ce")]["exact_match"] for t in tasks]
    lines.append(
        "| `ce` (its own score) | "
        + " | ".join(f"{c['mean']:.3f} ± {c['std']:.3f}" for c in ce)
        + " |"
    )
    for arm in PRETRAINED_ARMS[1:]:
        lines.append(f"| `{arm}` | " + " | ".join(_cell_text(rows[(t, arm)]) for t in tasks) + " |")
    return lines


def _where(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"`{r['loss']}` on {TASK_NAMES.get(r['task'], r['task'])}" for r in rows)


def headline(family: list[dict[str, Any]]) -> str:
    """The section's first sentence: what survives Holm, gains and harms told apart (a harm
    is never "survives" under a question about help), then what TOST shows after Holm."""
    n = len(family)
    shown = [r for r in family if r["vs_ce"]["exact_match"]["p_holm"] < ALPHA]
    harms = [r for r in shown if harmful(r["vs_ce"]["exact_match"])]
    gains = [r for r in shown if r not in harms]
    equivalent = [r for r in family if r["vs_ce"]["exact_match"].get("equivalent")]
    what = (
        f"{n} primary tests (each arm against `ce`, exact match on the held-out questions, "
        f"Holm over all {n} at {ALPHA})"
    )
    if not shown:
        best = min(family, key=lambda r: r["vs_ce"]["exact_match"]["p_holm"])
        head = (
            f"**Not shown on a pretrained model.** None of the {what} survives; the smallest "
            f"adjusted p is {best['vs_ce']['exact_match']['p_holm']:.2g} (`{best['loss']}`, "
            f"{TASK_NAMES.get(best['task'], best['task'])})."
        )
    else:
        parts = [f"better than `ce`: {_where(gains)}"] if gains else []
        parts += [f"worse than `ce`: {_where(harms)}"] if harms else []
        head = f"**{len(shown)} of the {what} survive: " + "; ".join(parts) + ".**"
    margin = MARGINS["pretrained"]
    tost = f"within ±{margin:g} (TOST, Holm over the {n})"
    if equivalent:
        return f"{head} Shown equivalent to `ce` {tost}: {_where(equivalent)}."
    return f"{head} No arm is shown equivalent to `ce` {tost} either."


def levelling(runs: list[Run], tasks: list[str]) -> list[str]:
    """Per task, whether ce levelled off; the tasks where it did not are also tested at the
    earlier budget, Holm over all of their tests together."""
    out, climbing = [], {}
    for task in tasks:
        curve = ce_curve(runs, task)
        last = max(curve)
        mark = max(s for s in curve if s <= 0.8 * last)
        name = TASK_NAMES.get(task, task)
        if curve[last] - curve[mark] >= LEVELLED:
            climbing[task] = (
                mark,
                f"{curve[mark]:.3f} at step {mark}, {curve[last]:.3f} at {last}",
            )
            continue
        out.append(
            f"- `ce` had levelled off on {name}: mean exact match {curve[mark]:.3f} at step "
            f"{mark}, {curve[last]:.3f} at step {last}."
        )
    if not climbing:
        return out
    early = [at_step(r, climbing[r["task"]][0]) for r in runs if r["task"] in climbing]
    tests = [r for r in summarise(early, "pretrained") if "verdict" in r]
    for task, (mark, seen) in climbing.items():
        parts = [f"`{r['loss']}` {_cell_text(r).strip('*')}" for r in tests if r["task"] == task]
        out.append(
            f"- `ce` was still improving on {TASK_NAMES.get(task, task)} ({seen}), so it is also "
            f"reported at step {mark} (Holm over the {len(tests)} tests at that budget): "
            + "; ".join(parts)
            + "."
        )
    return out


def secondary(summary: list[dict[str, Any]]) -> str:
    found, tested = [], 0
    for row in summary:
        for metric, test in row.get("vs_ce", {}).items():
            q = test.get("p_bh")
            if q is None or q != q:
                continue
            tested += 1
            if q < ALPHA:
                found.append(
                    f"`{row['loss']}` on {TASK_NAMES.get(row['task'], row['task'])}: "
                    f"{metric} {_signed(test['mean_diff'])}, q_BH {q:.2g}"
                )
    listed = "; ".join(found) if found else "none survives"
    return (
        f"- Secondary metrics, the protocol's registered family (MAE, within 5 %, median "
        f"relative error; {tested} tests, Benjamini–Hochberg): {listed}. Every other figure "
        "in bench/results/accuracy-pretrained.md is exploratory (raw p, no correction)."
    )


def how_run(runs: list[Run], sweeps: list[Run], tasks: list[str]) -> str:
    chosen = []
    for sweep in (s for s in sweeps if s["task"] in tasks):
        what = "`ce`'s learning rate" if sweep["sweep"] == "lr" else "`smmd_tuned`'s"
        config = ", ".join(f"{k} {v:.3g}" for k, v in sweep["config"].items())
        score = sweep["metrics"].get("eval_exact_match")
        chosen.append(
            f"{what} on {TASK_NAMES.get(sweep['task'], sweep['task'])}: {config} "
            f"(validation exact match {score:.3f})"
        )
    commits = sorted({r["commit"][:12] for r in runs})
    hours = sum(r["wall_s"] for r in runs) / 3600
    numbers_first = all(d.get("number_first") for r in runs for d in r["decoding"].values())
    return (
        f"- How it was run: SmolLM2-135M-Instruct fully fine-tuned, 150 steps of batch 8, "
        f"{len(runs)} runs in {hours:.1f} h on 2 CPU cores, one at a time, at commit(s) "
        f"{', '.join(f'`{c}`' for c in commits)}; every answer decoded "
        f"{'number-first' if numbers_first else 'as each run records'}. Chosen on "
        "validation rows carved from the training data: " + "; ".join(chosen) + "."
    )


def render(runs: list[Run], sweeps: list[Run]) -> list[str]:
    """The section's pretrained part (a heading and its lines)."""
    lines = ["### On a pretrained model: SmolLM2-135M (bench/protocol.md)", ""]
    tasks = complete_tasks(runs)
    planned = len(CELLS) * len(PRETRAINED_ARMS) * len(SEEDS)
    if not tasks:
        progress = (
            f"The protocol's study is running: {len(runs)} of its {planned} runs have finished "
            "(bench/results/pretrained-runs/); its table appears here once a task has every arm "
            "at all five seeds."
        )
        return [*lines, progress, ""]
    kept = [r for r in runs if r["task"] in tasks]
    summary = summarise(kept, "pretrained")
    family = [r for r in summary if "verdict" in r]
    bullets = [f"- {TASK_NAMES.get(r['task'], r['task'])}: {r['verdict']}" for r in family]
    bullets += [*levelling(kept, tasks), secondary(summary), how_run(kept, sweeps, tasks)]
    # The protocol's cells not complete yet (with runs or not): once they are, Holm runs over
    # their tests too, so the p values above can only grow.
    started = dict.fromkeys(r["task"] for r in runs)
    missing = [t for t in dict.fromkeys([*CELLS, *started]) if t not in tasks]
    if missing:
        each = len(PRETRAINED_ARMS) * len(SEEDS)
        names = ", ".join(
            f"{TASK_NAMES.get(t, t)} ({sum(r['task'] == t for r in runs)} of {each} runs)"
            for t in missing
        )
        bullets.append(
            f"- Not complete yet, so not in the table: {names}. The study is still running; "
            "once a task is complete its tests join the Holm family, so no p value above can "
            "fall."
        )
    legend = (
        "Exact match against `ce`: mean paired difference over 5 seeds with its 95 % confidence "
        "interval, p after Holm over the whole table, ⟨bootstrap interval over questions × "
        "seeds⟩, ≡ shown equivalent within the margin (TOST, Holm over the table); bold: "
        "survives Holm (marked worse where the arm is below `ce`)."
    )
    return [*lines, headline(family), "", legend, "", *table(summary, tasks), "", *bullets, ""]
