"""The accuracy table's statistics, all through jobs.stats (scipy underneath).

Per cell (model, task, held-out split) every loss is compared with ce on the seeds both
ran (jobs.stats.compare: paired t-test and CI, TOST at ±margin exact match, wins, and a
bootstrap over questions × seeds when the runs kept their answers). Then the table's
families: Holm over every primary test of the table together (exact match in the cells and
rows the caller's `primary` names) and, apart, over their TOST p; Benjamini–Hochberg over
the registered secondary tests of the table (the caller's `secondary`; by default every
other test); the rest exploratory (marked so; its raw p, no correction). Rows are the
JSON's dicts: NaN where a figure is undefined (the writer stores null).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from jobs.calibration import per_arm
from jobs.infer.evaluate import question_records, score_records
from jobs.stats import (
    ArmResult,
    Footing,
    MetricTest,
    PrimaryTest,
    QuestionRecord,
    RunOutcome,
    benjamini_hochberg,
    compare,
    holm,
)
from jobs.stats.footing import still_rising
from jobs.stats.power import ALPHA  # the product's significance level, one for all
from jobs.stats.verdict import verdict

METRICS = (
    "exact_match",
    "within_5pct",
    "within_1pct",
    "digit_accuracy",
    "mae",
    "median_rel_error",
    "log_error",
    "parse_failure_rate",
)
PRIMARY = "exact_match"
# bench/protocol.md's registered secondary metrics, on its primary rows (Benjamini–Hochberg
# over the table); every other test of that table is exploratory: raw p, no correction.
REGISTERED = ("mae", "within_5pct", "median_rel_error")
# Exact match: "no effect" is claimed only when shown within ±margin; the small study's
# margin, and bench/protocol.md's for the pretrained one.
MARGINS = {"small": 0.02, "paper": 0.02, "pretrained": 0.05}
N_BOOT = 2000
TUNED_CE = frozenset({"pretrained"})  # scales whose protocol swept ce's learning rate

Cell = tuple[str, str, str]  # (model, task, split)


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _none(value: float) -> float | None:
    return None if math.isnan(value) else value


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample std of the finite values; `n` counts them, `nan` the others."""
    finite = [v for v in values if math.isfinite(v)]
    return {
        "mean": statistics.fmean(finite) if finite else math.nan,
        "std": statistics.stdev(finite) if len(finite) > 1 else math.nan,
        "n": float(len(finite)),
        "nan": float(len(values) - len(finite)),
    }


def judged(run: dict[str, Any], split: str) -> list[QuestionRecord]:
    """A run's answers on a split, judged again from its stored text (none in runs from
    before the bench kept them)."""
    preds = (run.get("predictions") or {}).get(split)
    targets = (run.get("targets") or {}).get(split)
    if not preds or targets is None:
        return []
    return question_records(preds, targets, run["task"])


def outcomes(runs: list[dict[str, Any]]) -> dict[Cell, dict[str, list[RunOutcome]]]:
    """The runs as jobs.stats inputs, per cell and loss (step time kept as a metric)."""
    cells: dict[Cell, dict[str, list[RunOutcome]]] = {}
    for run in runs:
        for split, scores in run["metrics"].items():
            metrics = {k: None if v is None else float(v) for k, v in scores.items()}
            metrics["step_time_s"] = run["step_time_s"]
            questions = judged(run, split)
            if "log_error" not in metrics and questions:  # a run scored before log_error
                metrics["log_error"] = _none(score_records(questions)["log_error"])
            outcome = RunOutcome(seed=run["seed"], metrics=metrics, questions=questions)
            cell = cells.setdefault((run["model"], run["task"], split), {})
            cell.setdefault(run["loss"], []).append(outcome)
    return cells


def test_fields(test: MetricTest) -> dict[str, Any]:
    """One test as the JSON stores it; adjusted p (p_holm or p_bh) is added by `adjust`."""
    ci = (test.ci.low, test.ci.high) if test.ci else (math.nan, math.nan)
    boot = (test.ci_boot.low, test.ci_boot.high) if test.ci_boot else (math.nan, math.nan)
    out: dict[str, Any] = {
        "n": float(test.n),
        "mean_diff": _nan(test.diff),
        "ci_low": ci[0],
        "ci_high": ci[1],
        "d_z": _nan(test.d_z),
        "t": _nan(test.t),
        "p": _nan(test.p),
        "wins": test.wins,
        "losses": test.losses,
        "ci_boot_low": boot[0],
        "ci_boot_high": boot[1],
        "p_boot": _nan(test.p_boot),
        "notes": test.notes,
    }
    if isinstance(test, PrimaryTest):
        out |= {"margin": test.margin, "p_tost": _nan(test.p_tost), "equivalent": test.equivalent}
    return out


def _row(
    cell: Cell, loss: str, runs: Sequence[RunOutcome], intervals: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    model, task, split = cell
    seeds = sorted(r.seed for r in runs)
    by_seed = {r.seed: r.metrics for r in runs}
    row: dict[str, Any] = {"model": model, "task": task, "split": split, "loss": loss,
                           "seeds": seeds}  # fmt: skip
    for metric in METRICS:
        row[metric] = mean_std([_nan(by_seed[s].get(metric)) for s in seeds])
    if loss in intervals:
        row["intervals"] = intervals[loss]
    return row


def _tested(row: dict[str, Any], arm: ArmResult, base: list[RunOutcome]) -> dict[str, Any]:
    """The row with its tests against ce and its step time relative to ce's."""
    assert arm.vs_ce is not None
    row["vs_ce"] = {t.metric: test_fields(t) for t in (arm.vs_ce, *arm.secondary)}
    times = {r.seed: _nan(r.metrics.get("step_time_s")) for r in base}
    row["time_vs_ce"] = mean_std(
        [_nan(r.metrics.get("step_time_s")) / times[r.seed] for r in arm.runs if r.seed in times]
    )
    return row


def adjust(
    family: list[tuple[dict[str, Any], PrimaryTest]],
    others: list[dict[str, Any]],
    footing: Callable[[dict[str, Any]], Footing | None] = lambda row: None,
) -> None:
    """Holm over the primary family (p_holm, and each row's verdict from it), Holm over the
    same family's TOST p (p_tost_holm: an equivalence claim is corrected too), BH over the
    registered secondary tests (p_bh), each over the whole table."""
    adjusted = holm([test.p for _, test in family])
    tosts = holm([test.p_tost for _, test in family])
    tested = sum(p is not None for p in adjusted)
    for (row, test), p, p_tost in zip(family, adjusted, tosts, strict=True):
        equivalent = None if p_tost is None else p_tost < ALPHA
        fields = {"p_holm": _nan(p), "p_tost_holm": _nan(p_tost), "equivalent": equivalent}
        row["vs_ce"][PRIMARY].update(fields)
        final = test.model_copy(
            update={"p_holm": p, "p_tost_holm": p_tost, "equivalent": equivalent}
        )
        row["verdict"] = verdict(row["loss"], final, "ce", tested, ALPHA, footing(row))
    for fields, q in zip(others, benjamini_hochberg([f["p"] for f in others]), strict=True):
        fields["p_bh"] = _nan(q)


def summarise_table(
    runs: list[dict[str, Any]],
    *,
    rank: Callable[[str], Any],
    primary: Callable[[str, str], bool],
    margin: float,
    secondary: Callable[[str, str, str], bool] = lambda split, loss, metric: True,
    footing: Callable[[dict[str, Any]], Footing | None] = lambda row: None,
) -> list[dict[str, Any]]:
    """One row per (model, task, split, loss), losses in `rank` order: mean ± std over
    seeds, tests against ce, the table's adjusted p, and for the primary family a verdict.
    `primary(split, loss)`: whether that row's exact-match test is in the Holm family;
    `margin`: TOST's equivalence margin on exact match; `secondary(split, loss, metric)`:
    whether that test is in the registered secondary family (BH; by default every test
    outside the primary family), every other one is marked exploratory; `footing(row)`: what
    a primary row's verdict rests on."""
    rows: list[dict[str, Any]] = []
    family: list[tuple[dict[str, Any], PrimaryTest]] = []
    others: list[dict[str, Any]] = []
    for cell, arms in outcomes(runs).items():
        ordered = {loss: arms[loss] for loss in sorted(arms, key=rank)}
        # Per arm, its calibrated 90 % interval (runs that measured one); its width and
        # score are tested too (secondary where registered, else exploratory).
        intervals = per_arm.summary(ordered)
        tested = [m for m in METRICS if m != PRIMARY] + list(per_arm.TESTED if intervals else ())
        if "ce" not in ordered or len(ordered) < 2:
            rows += [_row(cell, loss, outs, intervals) for loss, outs in ordered.items()]
            continue
        comparison = compare(ordered, primary=PRIMARY, secondary=tested, margin=margin,
                             alpha=ALPHA, n_boot=N_BOOT)  # fmt: skip
        for arm in comparison.arms:
            row = _row(cell, arm.arm, ordered[arm.arm], intervals)
            rows.append(row)
            if arm.vs_ce is None:
                continue
            tests = _tested(row, arm, ordered["ce"])["vs_ce"]
            in_family = primary(cell[2], arm.arm)
            if in_family:
                family.append((row, arm.vs_ce))
            for metric, fields in tests.items():
                if in_family and metric == PRIMARY:
                    continue
                if secondary(cell[2], arm.arm, metric):
                    others.append(fields)
                else:
                    fields["exploratory"] = True
    adjust(family, others, footing)
    return rows


def footings(runs: list[dict[str, Any]], scale: str) -> Callable[[dict[str, Any]], Footing]:
    """What a row's verdict rests on: ce's learning rate tuned (the pretrained protocol's
    `tune_lr` sweep; the small study's ce ran at the base rate) and whether ce's mean exact
    match was still rising over its last 20 % of steps (its runs' learning curves)."""
    curves: dict[tuple[str, str], list[dict[int, float]]] = defaultdict(list)
    for run in runs:
        points = {p["step"]: p["exact_match"] for p in run.get("curve") or []
                  if p.get("exact_match") is not None}  # fmt: skip
        if run["loss"] == "ce" and points:
            curves[(run["model"], run["task"])].append(points)

    def of(row: dict[str, Any]) -> Footing:
        found = curves.get((row["model"], row["task"]), [])
        rising, detail = still_rising(found, "exact_match", True)
        steps = max(set.intersection(*(set(c) for c in found)), default=None) if found else None
        return Footing(steps=steps, baseline_tuned=scale in TUNED_CE,
                       baseline_rising=rising, rising_detail=detail)  # fmt: skip

    return of
