"""A table study's reference that is not a language model (jobs/reference: histogram
gradient boosting), fitted once when the study's result is built, on the training rows of
the very split its runs trained on (read from a run's stored spec, where the control
plane pinned the table's location and the target's decimals) and scored on the same
held-out rows, once per study seed. It sits beside the arms, outside the Holm family: no
test compares it with `ce`; it answers "would a model that is not an LM do better?"."""

from __future__ import annotations

import logging
from typing import Any

from jobs.data.table import split_table
from jobs.data.types import DataError
from jobs.reference import fit_reference
from jobs.spec import StudySpec
from service.store import JobRow, StudyRow, UnreadableSpecError

log = logging.getLogger(__name__)
NOTE = "not a language model; shown beside the arms, outside the corrected family of tests"


def reference(spec: StudySpec, study: StudyRow, jobs: dict[str, JobRow]) -> dict[str, Any] | None:
    """The reference row for a table study (None for other tasks), or why it is missing."""
    if spec.base.data.task != "table":
        return None
    rows = [jobs.get(run["job_id"]) for run in study.runs if run["kind"] == "job"]
    ran = next((row for row in rows if row is not None and row.status == "succeeded"), None)
    if ran is None:
        return {"note": NOTE, "error": "no run succeeded: its split was never read"}
    try:
        data = ran.job_spec.data
        found = fit_reference(split_table(data), data, list(spec.seeds))
    except (DataError, OSError, ValueError, UnreadableSpecError) as error:
        log.warning("study %s: no gradient-boosting reference: %s", study.id, error)
        return {"note": NOTE, "error": str(error)[:500]}
    return {"note": NOTE, **found}
