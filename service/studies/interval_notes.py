"""Why an arm of a study has no calibrated interval in its result: a study's
`result.intervals` lists only arms with a calibrated run, and an empty `{}` told no one
whether calibration was off, the runs predate it, or they all failed. `interval_notes`
says, per arm left out, what its runs lack."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection

from jobs.calibration.per_arm import COVERAGE, LEVEL, interval_metrics
from jobs.calibration.record import CALIBRATION_FILE, read_record
from jobs.storage.uri import join_uri, read_uri_text
from service.store import JobRow, StudyRow


def uncalibrated_because(row: JobRow) -> str | None:
    """What a succeeded run lacks for a calibrated interval; None when it has one."""
    if not row.best_checkpoint:
        return "kept no checkpoint to calibrate"
    try:
        raw = json.loads(read_uri_text(join_uri(row.best_checkpoint, CALIBRATION_FILE)))
    except FileNotFoundError:
        questions = row.job_spec.calibration.questions
        if questions == 0:
            return "calibration is off (base.calibration.questions: 0)"
        return f"its checkpoint holds no {CALIBRATION_FILE} (a run from before calibration?)"
    except ValueError as error:  # not JSON: json.JSONDecodeError is a ValueError
        return f"its {CALIBRATION_FILE} is unreadable ({type(error).__name__})"
    if interval_metrics(read_record(raw)).get(COVERAGE) is None:
        return f"its calibration has no calibrated {LEVEL:.0%} level"
    return None


def interval_notes(
    labels: list[str], study: StudyRow, jobs: dict[str, JobRow], calibrated: Collection[str]
) -> dict[str, str]:
    """Per arm (of `labels`) not in `calibrated`: why it has no interval, counted over its
    evaluation runs ("3 of 3 runs: calibration is off ...")."""
    notes: dict[str, str] = {}
    for label in labels:
        if label in calibrated:
            continue
        runs = [jobs.get(r["job_id"]) for r in study.runs if r["arm"] == label]
        done = [r for r in runs if r is not None and r.kind == "job" and r.status == "succeeded"]
        if not done:
            notes[label] = "no run succeeded, so none was calibrated"
            continue
        reasons = Counter(uncalibrated_because(r) or "calibrated" for r in done)
        notes[label] = "; ".join(
            f"{n} of {len(done)} runs: {why}" for why, n in sorted(reasons.items())
        )
    return notes
