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

from jobs.calibration.record import WIDE_RELATIVE_WIDTH, Calibration
from jobs.stats import RunOutcome

LEVEL = 0.9
COVERAGE = "interval_coverage_90"
WIDTH = "interval_width_90"  # median of width / max(|answer|, 1)
SCORE = "interval_score_90"  # mean Winkler score, in answer units
TESTED = (WIDTH, SCORE)


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
