"""Does a numeric loss give tighter honest intervals? Each run's end-of-job calibration
(jobs/calibration) measured its calibrated 90 % interval out of sample, on held-out questions
each fitted without: its coverage, its median width relative to the answer and its mean
interval (Winkler) score. The width and the score join the study's secondary tests (lower is
better for both); coverage is summarised per arm, not tested: nearer 90 % is right, not
higher."""

from __future__ import annotations

import json
import statistics
from typing import Any

from jobs.calibration.record import CALIBRATION_FILE, WIDE_RELATIVE_WIDTH, read_record
from jobs.stats import RunOutcome
from jobs.storage.uri import join_uri, read_uri_text
from service.store import JobRow

LEVEL = 0.9
COVERAGE = "interval_coverage_90"
WIDTH = "interval_width_90"  # median of width / max(|answer|, 1)
SCORE = "interval_score_90"  # mean Winkler score, in answer units
TESTED = (WIDTH, SCORE)


def interval_metrics(row: JobRow) -> dict[str, float | None]:
    """The run's calibrated 90 % interval as measured out of sample; {} when its checkpoint
    kept no calibration (`calibration.questions: 0`, or the run predates it)."""
    if not row.best_checkpoint:
        return {}
    try:
        raw = json.loads(read_uri_text(join_uri(row.best_checkpoint, CALIBRATION_FILE)))
    except FileNotFoundError:
        return {}
    record = read_record(raw)
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
