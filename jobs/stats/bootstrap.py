"""A paired bootstrap over questions × seeds from the runs' per-question records.

Each replicate draws the seeds (pairs) with replacement and, independently, the questions
with replacement; both arms are scored on the same draw (the pairing is kept on
both levels), each seed's metric is aggregated over the drawn questions as the evaluation
does (a mean, or the median for median_rel_error), and the statistic is the mean over
drawn seeds of arm − baseline. scipy.stats.bootstrap resamples one axis only, so the
two-level draw is a seeded numpy resample.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from jobs.stats.models import QuestionRecord

# Per-question scores a record carries as numbers (a mean over the questions that have one).
STORED = ("log_error", "interval_score_90", "crps")


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
    elif metric in STORED:
        # Scored where they were measured (jobs/infer/scores.py); None: not for this question.
        stored = [getattr(r, metric) for r in records]
        if all(v is None for v in stored):
            return None  # records from before the score, or a run that measured none
        values = [np.nan if v is None else v for v in stored]
    else:
        return None
    return np.asarray(values, dtype=float)


@dataclass(frozen=True)
class Bootstrap:
    ci: tuple[float, float]
    p: float


def weighted_means(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per draw and seed, the mean of the drawn questions' values, NaN ones not counted.

    values [S, Q] (NaN: the question does not count), counts [B, Q] (how often each question
    was drawn) -> [B, S]; NaN where no counted question was drawn."""
    defined = ~np.isnan(values)
    sums = counts @ np.where(defined, values, 0.0).T  # [B, S]
    n = counts @ defined.T.astype(float)  # [B, S]
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / n


def weighted_medians(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """As weighted_means, the median (of an even count, the mean of the two middle ones)."""
    out = np.full((counts.shape[0], values.shape[0]), np.nan)
    for s, row in enumerate(values):
        order = np.argsort(row)[: np.count_nonzero(~np.isnan(row))]  # NaN sort last: cut
        if order.size == 0:
            continue
        ranked = np.cumsum(counts[:, order], axis=1)  # [B, Q_s]: drawn so far, in value order
        n = ranked[:, -1]
        low = np.argmax(ranked >= ((n + 1) // 2)[:, None], axis=1)  # 1-based rank ⌈n/2⌉
        high = np.argmax(ranked >= (n // 2 + 1)[:, None], axis=1)  # rank ⌊n/2⌋ + 1
        medians = (row[order][low] + row[order][high]) / 2
        out[:, s] = np.where(n > 0, medians, np.nan)
    return out


def paired_bootstrap(
    arm: np.ndarray, base: np.ndarray, metric: str, *, n_boot: int, alpha: float, seed: int
) -> Bootstrap | None:
    """Percentile CI and two-sided p of the mean per-seed difference.

    arm, base: [S, Q] per-question values, row s of both from the same seed, column q the
    same question. A draw of questions is a count per question, shared by both
    arms and every seed; a draw of seeds picks rows of the per-seed differences. None when
    too few replicates are defined (e.g. MAE with almost nothing parsed)."""
    if arm.shape != base.shape or arm.ndim != 2 or arm.size == 0:
        raise ValueError(f"paired question arrays differ in shape: {arm.shape} vs {base.shape}")
    n_seeds, n_questions = arm.shape
    rng = np.random.default_rng(seed)
    aggregate = weighted_medians if metric == "median_rel_error" else weighted_means
    drawn = rng.integers(0, n_questions, size=(n_boot, n_questions))  # [B, Q] indices
    # How often each question was drawn in each replicate: one bincount over offset indices.
    offsets = (np.arange(n_boot)[:, None] * n_questions + drawn).ravel()
    counts = np.bincount(offsets, minlength=n_boot * n_questions).reshape(n_boot, n_questions)
    per_seed = aggregate(arm, counts) - aggregate(base, counts)  # [B, S]
    seeds = rng.integers(0, n_seeds, size=(n_boot, n_seeds))  # [B, S] drawn seed rows
    boot = np.take_along_axis(per_seed, seeds, axis=1).mean(axis=1)
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
