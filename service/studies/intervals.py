"""A study run's calibrated 90 % interval, read from its checkpoint's calibration record
(jobs/calibration/per_arm.py says what each figure is and how arms are summarised)."""

from __future__ import annotations

import json

from jobs.calibration.per_arm import interval_metrics
from jobs.calibration.record import (
    CALIBRATION_FILE,
    QUESTIONS_FILE,
    QuestionCalibration,
    read_record,
)
from jobs.storage.uri import join_uri, read_uri_text
from service.store import JobRow


def run_intervals(row: JobRow) -> dict[str, float | None]:
    """{} when the run's checkpoint kept no calibration (`calibration.questions: 0`, or the
    run predates it)."""
    if not row.best_checkpoint:
        return {}
    try:
        raw = json.loads(read_uri_text(join_uri(row.best_checkpoint, CALIBRATION_FILE)))
    except FileNotFoundError:
        return {}
    return interval_metrics(read_record(raw))


def run_questions(row: JobRow) -> list[QuestionCalibration]:
    """Each calibrated question's figures (QUESTIONS_FILE); [] when the checkpoint kept none
    (no calibration, or a run from before they were kept)."""
    if not row.best_checkpoint:
        return []
    try:
        text = read_uri_text(join_uri(row.best_checkpoint, QUESTIONS_FILE))
    except FileNotFoundError:
        return []
    return [QuestionCalibration.model_validate_json(line) for line in text.splitlines() if line]
