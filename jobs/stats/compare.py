"""compare(): every arm against the baseline on the same seeds, with corrected p-values.

The primary family (Holm) is every primary test of one call: each primary metric × each
arm, and the equivalence (TOST) p-values are Holm-corrected over the same family. The
secondary family (Benjamini–Hochberg) is every secondary test of the call. Exploratory
metrics are tested and reported with their raw p, outside any correction. A caller that
wants a wider family (every cell of a table) passes all its arms at once or adjusts the
returned raw p.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jobs.stats.bootstrap import paired_bootstrap, paired_questions, question_values
from jobs.stats.models import (
    ArmResult,
    Comparison,
    Footing,
    Interval,
    MetricTest,
    PrimaryTest,
    RunOutcome,
    RunSummary,
    SecondaryTest,
    higher_is_better,
)
from jobs.stats.paired import benjamini_hochberg, fmt, holm, paired_t, tally, tost
from jobs.stats.verdict import label, verdict

SECONDARY = ("mae", "within_5pct", "median_rel_error")


def _value(run: RunOutcome, metric: str) -> float | None:
    value = run.metrics.get(metric)
    return None if value is None or not math.isfinite(value) else float(value)


def _by_seed(arm: str, runs: Sequence[RunOutcome]) -> dict[int, RunOutcome]:
    out: dict[int, RunOutcome] = {}
    for run in runs:
        if run.seed in out:
            raise ValueError(f"arm {arm!r}: seed {run.seed} appears twice")
        out[run.seed] = run
    return out


def _bootstrap_fields(
    arm: Mapping[int, RunOutcome],
    base: Mapping[int, RunOutcome],
    seeds: list[int],
    metric: str,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """ci_boot, p_boot, boot_seeds and notes of one test from the per-question records."""
    empty: dict[str, Any] = {"ci_boot": None, "p_boot": None, "boot_seeds": 0}
    usable, notes = paired_questions({s: (arm[s].questions, base[s].questions) for s in seeds})
    if not usable:
        return {**empty, "notes": [*notes, "no per-question predictions: no bootstrap"]}
    rows = [
        (question_values(arm[s].questions, metric), question_values(base[s].questions, metric))
        for s in usable
    ]
    if any(a is None or b is None for a, b in rows):
        absent = f"{metric} is not in the per-question records: no bootstrap"
        return {**empty, "notes": [*notes, absent]}
    boot = paired_bootstrap(
        np.stack([a for a, _ in rows]),  # type: ignore[misc]
        np.stack([b for _, b in rows]),  # type: ignore[misc]
        metric,
        **settings,
    )
    if boot is None:
        return {**empty, "notes": [*notes, f"{metric} undefined in most bootstrap draws"]}
    if len(usable) < len(seeds):
        notes.append(f"bootstrap over {len(usable)} of {len(seeds)} pairs (seeds {usable})")
    ci = Interval(low=boot.ci[0], high=boot.ci[1])
    return {"ci_boot": ci, "p_boot": boot.p, "boot_seeds": len(usable), "notes": notes}


def metric_test(
    arm: Mapping[int, RunOutcome],
    base: Mapping[int, RunOutcome],
    metric: str,
    *,
    alpha: float,
    n_boot: int,
    seed: int,
    margin: float | None = None,
) -> dict[str, Any]:
    """The fields of a MetricTest: paired t over the seeds both arms have with the metric
    defined, wins, the bootstrap over questions × seeds, and with a margin TOST."""
    common = sorted(set(arm) & set(base))
    notes = []
    unpaired = sorted(set(arm) ^ set(base))
    if unpaired:
        notes.append(f"seeds {unpaired} are in one arm only: paired on {common}")
    values = {s: (_value(arm[s], metric), _value(base[s], metric)) for s in common}
    pairs = {s: (x, y) for s, (x, y) in values.items() if x is not None and y is not None}
    seeds = sorted(pairs)
    if undefined := sorted(set(common) - set(seeds)):
        notes.append(f"seeds {undefined}: {metric} undefined in a run, left out")
    a, b = [pairs[s][0] for s in seeds], [pairs[s][1] for s in seeds]
    test = paired_t(a, b, alpha)
    if test.reason is not None:
        notes.append(test.reason)
    wins, losses, ties = tally([x - y for x, y in zip(a, b, strict=True)], higher_is_better(metric))
    settings = {"n_boot": n_boot, "alpha": alpha, "seed": seed}
    boot = _bootstrap_fields(arm, base, seeds, metric, settings)
    fields = {
        "metric": metric,
        "higher_is_better": higher_is_better(metric),
        "seeds": seeds,
        "unpaired_seeds": unpaired,
        "n": test.n,
        "diff": test.mean_diff,
        "ci": None if test.ci is None else Interval(low=test.ci[0], high=test.ci[1]),
        "t": test.t,
        "p": test.p,
        "d_z": test.d_z,
        "wins": wins,
        "losses": losses,
        "ties": ties,
        **boot,
        "notes": notes + boot["notes"],
    }
    if margin is not None:
        p_tost = tost(a, b, margin)
        fields |= {"margin": margin, "p_tost": p_tost, "equivalent": None}
    return fields


def _check(arms: Mapping[str, Sequence[RunOutcome]], baseline: str, **settings: Any) -> None:
    if baseline not in arms:
        raise ValueError(f"baseline {baseline!r} is not among the arms {sorted(arms)}")
    if not 0 < settings["alpha"] < 1:
        raise ValueError(f"alpha must be in (0, 1), got {settings['alpha']}")
    for metric, margin in settings["margins"].items():
        if margin <= 0:
            raise ValueError(f"margin must be positive, got {margin} for {metric}")
    if settings["n_boot"] < 100:
        raise ValueError(f"n_boot must be at least 100, got {settings['n_boot']}")


def _margins(primaries: list[str], margin: float | Mapping[Any, float] | None) -> dict[str, float]:
    """Per primary metric its equivalence margin: one number for all, or named per metric (a
    primary without one gets no TOST)."""
    if margin is None:
        return {}
    if isinstance(margin, int | float):
        return {m: float(margin) for m in primaries}
    return {m: float(margin[m]) for m in primaries if m in margin}


def _correct(primaries: list[dict[str, Any]], alpha: float) -> None:
    """Holm over the family (every primary metric × arm): the t-tests' p and, apart, the
    TOST p (an equivalence claim is a claim of the family too)."""
    for fields, p_holm in zip(primaries, holm([f["p"] for f in primaries]), strict=True):
        fields["p_holm"] = p_holm
    tosts = holm([f.get("p_tost") for f in primaries])
    for fields, p_tost_holm in zip(primaries, tosts, strict=True):
        fields.setdefault("margin", None)
        fields.setdefault("p_tost", None)
        fields["p_tost_holm"] = p_tost_holm
        fields["equivalent"] = None if p_tost_holm is None else p_tost_holm < alpha


def _summary(arm: str, runs: Mapping[int, RunOutcome], metrics: list[str]) -> dict[str, Any]:
    mean: dict[str, float | None] = {}
    for metric in metrics:
        values = [v for r in runs.values() if (v := _value(r, metric)) is not None]
        mean[metric] = statistics.fmean(values) if values else None
    summaries = [RunSummary(seed=s, run_id=r.run_id, metrics=r.metrics) for s, r in runs.items()]
    return {"arm": arm, "runs": sorted(summaries, key=lambda r: r.seed), "mean": mean}


def compare(
    arms: Mapping[str, Sequence[RunOutcome]],
    *,
    baseline: str = "ce",
    primary: str | Sequence[str] = "exact_match",
    secondary: Sequence[str] = SECONDARY,
    exploratory: Sequence[str] = (),
    margin: float | Mapping[Any, float] | None = 0.02,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
    footing: Footing | None = None,
) -> Comparison:
    """Every arm against `baseline` on each primary metric (Holm over all metrics × arms,
    TOST with ±margin, Holm over those too), the secondary ones (Benjamini–Hochberg over
    all of them) and the exploratory ones (raw p, no correction)."""
    primaries = list(dict.fromkeys([primary] if isinstance(primary, str) else primary))
    if not primaries:
        raise ValueError("at least one primary metric")
    margins = _margins(primaries, margin)
    _check(arms, baseline, alpha=alpha, margins=margins, n_boot=n_boot)
    secondary = [m for m in dict.fromkeys(secondary) if m not in primaries]
    exploratory = [m for m in dict.fromkeys(exploratory) if m not in (*primaries, *secondary)]
    runs = {name: _by_seed(name, outcomes) for name, outcomes in arms.items()}
    others = [name for name in runs if name != baseline]
    settings: dict[str, Any] = {"alpha": alpha, "n_boot": n_boot, "seed": seed}
    base = runs[baseline]

    def tests(name: str, metrics: list[str], tost: bool = False) -> list[dict[str, Any]]:
        return [
            metric_test(runs[name], base, m, margin=margins.get(m) if tost else None, **settings)
            for m in metrics
        ]

    firsts = {n: tests(n, primaries, tost=True) for n in others}
    _correct([f for n in others for f in firsts[n]], alpha)
    seconds = {n: tests(n, secondary) for n in others}
    flat = [fields for n in others for fields in seconds[n]]
    for fields, p_bh in zip(flat, benjamini_hochberg([f["p"] for f in flat]), strict=True):
        fields["p_bh"] = p_bh
    family = sum(f["p"] is not None for n in others for f in firsts[n])
    metrics = [*primaries, *secondary, *exploratory]
    head = primaries[0]
    base_mean = _summary(baseline, base, metrics)
    results = [
        ArmResult(
            **base_mean,
            vs_ce=None,
            verdict=f"`{baseline}`: the baseline, {len(base)} runs, mean {label(head)} "
            + (fmt(m, signed=False) if (m := base_mean["mean"][head]) is not None else "n/a"),
        )
    ]
    for name in others:
        primary_tests = [PrimaryTest(**f) for f in firsts[name]]
        results.append(
            ArmResult(
                **_summary(name, runs[name], metrics),
                vs_ce=primary_tests[0],
                primary_tests=primary_tests,
                secondary=[SecondaryTest(**t) for t in seconds[name]],
                exploratory=[MetricTest(**t) for t in tests(name, exploratory)],
                verdict=verdict(name, primary_tests, baseline, family, alpha, footing),
            )
        )
    return Comparison(
        baseline=baseline,
        primary=head,
        primaries=primaries,
        secondary=secondary,
        exploratory=exploratory,
        alpha=alpha,
        margin=margins.get(head),
        margins=margins,
        footing=footing,
        n_boot=n_boot,
        seed=seed,
        family_size=family,
        secondary_family_size=sum(f["p"] is not None for f in flat),
        arms=results,
    )
