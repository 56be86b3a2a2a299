"""compare(): every arm against the baseline on the same seeds, with corrected p-values.

The primary family (Holm) is every primary test of one call; the secondary family
(Benjamini–Hochberg) is every secondary test of the call. A caller that wants a wider
family (every cell of a table) passes all its arms at once or adjusts the returned raw p.
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
    Interval,
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
        equivalent = None if p_tost is None else p_tost < alpha
        fields |= {"margin": margin, "p_tost": p_tost, "equivalent": equivalent}
    return fields


def _check(arms: Mapping[str, Sequence[RunOutcome]], baseline: str, **settings: float) -> None:
    if baseline not in arms:
        raise ValueError(f"baseline {baseline!r} is not among the arms {sorted(arms)}")
    if not 0 < settings["alpha"] < 1:
        raise ValueError(f"alpha must be in (0, 1), got {settings['alpha']}")
    if settings["margin"] <= 0:
        raise ValueError(f"margin must be positive, got {settings['margin']}")
    if settings["n_boot"] < 100:
        raise ValueError(f"n_boot must be at least 100, got {settings['n_boot']}")


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
    primary: str = "exact_match",
    secondary: Sequence[str] = SECONDARY,
    margin: float = 0.02,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Every arm against `baseline` on the primary metric (Holm over all of them, TOST
    with ±margin) and the secondary ones (Benjamini–Hochberg over all of them)."""
    _check(arms, baseline, alpha=alpha, margin=margin, n_boot=n_boot)
    secondary = [m for m in dict.fromkeys(secondary) if m != primary]
    runs = {name: _by_seed(name, outcomes) for name, outcomes in arms.items()}
    others = [name for name in runs if name != baseline]
    settings: dict[str, Any] = {"alpha": alpha, "n_boot": n_boot, "seed": seed}
    base = runs[baseline]
    primaries = [metric_test(runs[n], base, primary, margin=margin, **settings) for n in others]
    for fields, p_holm in zip(primaries, holm([f["p"] for f in primaries]), strict=True):
        fields["p_holm"] = p_holm
    seconds = [[metric_test(runs[n], base, m, **settings) for m in secondary] for n in others]
    flat = [fields for tests in seconds for fields in tests]
    for fields, p_bh in zip(flat, benjamini_hochberg([f["p"] for f in flat]), strict=True):
        fields["p_bh"] = p_bh
    family = sum(f["p"] is not None for f in primaries)
    metrics = [primary, *secondary]
    base_mean = _summary(baseline, base, metrics)
    results = [
        ArmResult(
            **base_mean,
            vs_ce=None,
            verdict=f"`{baseline}`: the baseline, {len(base)} runs, mean {label(primary)} "
            + (fmt(m, signed=False) if (m := base_mean["mean"][primary]) is not None else "n/a"),
        )
    ]
    for name, fields, tests in zip(others, primaries, seconds, strict=True):
        test = PrimaryTest(**fields)
        results.append(
            ArmResult(
                **_summary(name, runs[name], metrics),
                vs_ce=test,
                secondary=[SecondaryTest(**t) for t in tests],
                verdict=verdict(name, test, baseline, family, alpha),
            )
        )
    return Comparison(
        baseline=baseline,
        primary=primary,
        secondary=secondary,
        alpha=alpha,
        margin=margin,
        n_boot=n_boot,
        seed=seed,
        family_size=family,
        secondary_family_size=sum(f["p"] is not None for f in flat),
        arms=results,
    )
