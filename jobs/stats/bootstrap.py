"""A paired bootstrap over questions × seeds from the runs' per-question records.

Each replicate draws the seeds (pairs) with replacement and, independently, the question
indices with replacement; both arms are scored on the same draw (the pairing is kept on
both levels), each seed's metric is aggregated over the drawn questions as the evaluation
does (a mean, or the median for median_rel_error), and the statistic is the mean over
drawn seeds of arm − baseline. scipy.stats.bootstrap resamples one axis only, so the
two-level draw is a seeded numpy resample.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from jobs.stats.models import QuestionRecord

# Replicates scored at a time: (chunk, seeds, questions) float arrays stay small.
CHUNK = 250


def question_values(records: Sequence[QuestionRecord], metric: str) -> np.ndarray | None:
    """Per question, its share of `metric` [Q] (NaN where it does not count, as for MAE of
    an unparsed answer); None when the metric cannot be read from the records."""

    def within(share: float, r: QuestionRecord) -> float:
        if r.target_value is None or r.abs_error is None:
            return float(r.correct)  # a text answer counts as exact; unparsed: a miss
        return float(r.abs_error <= share * abs(r.target_value) + 1e-9)

    def numeric(r: QuestionRecord) -> bool:
        return r.target_value is not None and r.abs_error is not None

    if metric == "exact_match":
        values = [float(r.correct) for r in records]
    elif metric in ("within_1pct", "within_5pct"):
        share = 0.01 if metric == "within_1pct" else 0.05
        values = [within(share, r) for r in records]
    elif metric == "mae":
        values = [r.abs_error if numeric(r) else np.nan for r in records]  # type: ignore[misc]
    elif metric == "median_rel_error":
        values = [
            r.abs_error / max(abs(r.target_value), 1.0) if numeric(r) else np.nan  # type: ignore[arg-type, operator]
            for r in records
        ]
    elif metric == "digit_accuracy":
        if any(r.digit_accuracy is None for r in records):
            return None  # records from before the field existed
        values = [r.digit_accuracy for r in records]  # type: ignore[misc]
    elif metric == "parse_failure_rate":
        values = [float(r.target_value is not None and r.value is None) for r in records]
    else:
        return None
    return np.asarray(values, dtype=float)


@dataclass(frozen=True)
class Bootstrap:
    ci: tuple[float, float]
    p: float


def paired_bootstrap(
    arm: np.ndarray, base: np.ndarray, metric: str, *, n_boot: int, alpha: float, seed: int
) -> Bootstrap | None:
    """Percentile CI and two-sided p of the mean per-seed difference.

    arm, base: [S, Q] per-question values, row s of both from the same seed, column q the
    same question. None when too few replicates are defined (e.g. MAE with almost nothing
    parsed)."""
    if arm.shape != base.shape or arm.ndim != 2 or arm.size == 0:
        raise ValueError(f"paired question arrays differ in shape: {arm.shape} vs {base.shape}")
    n_seeds, n_questions = arm.shape
    rng = np.random.default_rng(seed)
    aggregate = np.nanmedian if metric == "median_rel_error" else np.nanmean
    replicates = []
    for start in range(0, n_boot, CHUNK):
        size = min(CHUNK, n_boot - start)
        seeds = rng.integers(0, n_seeds, size=(size, n_seeds))[:, :, None]  # [B, S, 1]
        questions = rng.integers(0, n_questions, size=(size, 1, n_questions))  # [B, 1, Q]
        with warnings.catch_warnings():
            # A draw with no defined question in a seed (MAE, nothing parsed) is NaN.
            warnings.simplefilter("ignore", RuntimeWarning)
            per_seed = aggregate(arm[seeds, questions], axis=2) - aggregate(
                base[seeds, questions], axis=2
            )  # [B, S]
        replicates.append(per_seed.mean(axis=1))
    boot = np.concatenate(replicates)
    boot = boot[np.isfinite(boot)]
    if boot.size < n_boot // 2:
        return None
    low, high = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    # Two-sided: twice the smaller tail at 0, with the +1 that keeps p above 0.
    below = (np.count_nonzero(boot <= 0) + 1) / (boot.size + 1)
    above = (np.count_nonzero(boot >= 0) + 1) / (boot.size + 1)
    return Bootstrap(ci=(float(low), float(high)), p=float(min(1.0, 2 * min(below, above))))


def paired_questions(
    pairs: Mapping[int, tuple[Sequence[QuestionRecord], Sequence[QuestionRecord]]],
) -> tuple[list[int], list[str]]:
    """The seeds whose two runs can be paired question by question (same questions in the
    same order, as many as the other usable seeds), and notes on the ones left out."""
    usable: list[int] = []
    notes = []
    for seed, (a, b) in sorted(pairs.items()):
        if not a or not b:
            continue
        if [q.target for q in a] != [q.target for q in b]:
            notes.append(f"seed {seed}: the two runs answered different questions")
        elif usable and len(a) != len(pairs[usable[0]][0]):
            notes.append(f"seed {seed}: {len(a)} questions, other seeds {len(pairs[usable[0]][0])}")
        else:
            usable.append(seed)
    return usable, notes
