"""Does a numeric loss give tighter honest intervals? Per run, its calibrated 90 % interval
as the calibration record measured it out of sample: coverage, median width relative to the
answer, mean interval (Winkler) score. Per arm, the means over its calibrated runs and the
registry's `wide` rule. Used by the service's studies and the bench's accuracy study alike;
the width and the score are secondary tests there (lower is better for both), coverage is
only summarised: nearer 90 % is right, not higher. No torch here: the control plane imports
it."""

from __future__ import annotations

import statistics
from typing import Any

from jobs.calibration.record import WIDE_RELATIVE_WIDTH, Calibration, QuestionCalibration
from jobs.stats import QuestionRecord, RunOutcome

LEVEL = 0.9
COVERAGE = "interval_coverage_90"
WIDTH = "interval_width_90"  # median of width / max(|answer|, 1)
SCORE = "interval_score_90"  # mean Winkler score, in answer units
CRPS = "crps"  # mean CRPS of the K samples, in answer units (from the per-question figures)
TESTED = (WIDTH, SCORE, CRPS)


def interval_metrics(record: Calibration | None) -> dict[str, float | None]:
    """The record's calibrated 90 % interval as measured out of sample; {} without one."""
    levels = [lv for lv in record.levels if lv.level == LEVEL] if record else []
    measured = levels[0].calibrated if levels else None
    if measured is None:
        return {}
    return {
        COVERAGE: measured.coverage,
        WIDTH: measured.relative_width_median,
        SCORE: measured.winkler_mean,
    }


def join_questions(
    questions: list[QuestionRecord], figures: list[QuestionCalibration]
) -> tuple[list[QuestionRecord], dict[str, float | None]]:
    """A run's answers with its calibration's per-question figures (QUESTIONS_FILE) joined by
    their place in the held-out set, and the run-level means a study tests: the samples'
    CRPS over the questions that had samples (the interval score's is the record's own
    `winkler_mean`, the mean of the same per-question scores). Unchanged without figures."""
    if not figures or not questions:
        return questions, {}
    by_index = {f.index: f for f in figures if 0 <= f.index < len(questions)}
    joined = [
        q.model_copy(update=by_index[i].model_dump(exclude={"index"})) if i in by_index else q
        for i, q in enumerate(questions)
    ]
    crps = [f.crps for f in by_index.values() if f.crps is not None]
    return joined, {CRPS: statistics.fmean(crps) if crps else None}


def _mean(runs: list[RunOutcome], metric: str) -> float | None:
    values = [v for r in runs if (v := r.metrics.get(metric)) is not None]
    return statistics.fmean(values) if values else None


def summary(arms: dict[str, list[RunOutcome]]) -> dict[str, dict[str, Any]]:
    """Per arm with any calibrated run: the means over its runs, and whether its typical
    interval is too wide to use as an answer (the registry's `wide` rule)."""
    out: dict[str, dict[str, Any]] = {}
    for arm, runs in arms.items():
        calibrated = [r for r in runs if r.metrics.get(COVERAGE) is not None]
        if not calibrated:
            continue
        width = _mean(calibrated, WIDTH)
        out[arm] = {
            "level": LEVEL,
            "runs": len(calibrated),
            "coverage": _mean(calibrated, COVERAGE),
            "relative_width_median": width,
            "winkler_mean": _mean(calibrated, SCORE),
            "wide": None if width is None else width > WIDE_RELATIVE_WIDTH,
        }
    return out
