"""Queries behind run storage (service/jobs/run_storage.py): an owner's jobs, and the studies
that name a job among their runs (a study reads its runs' folders for its result and its
per-run view, so a study's run folder is not its job's alone)."""

from __future__ import annotations

from sqlalchemy import select

from service.jobs.states import TERMINAL
from service.store.db import Database
from service.store.schema import JobRow, StudyRow


def owner_jobs(db: Database, owner: str) -> list[tuple[str, bool]]:
    """(job id, whether it has ended) of every job and sweep of `owner`."""
    with db.session() as s:
        rows = s.execute(select(JobRow.id, JobRow.status).where(JobRow.owner == owner)).all()
    return [(job_id, status in TERMINAL) for job_id, status in rows]


def studies_naming(db: Database, owner: str, job_id: str) -> list[str]:
    """The ids of `owner`'s studies that list `job_id` among their runs. Scanned in Python:
    an owner's studies are few, and JSON queries differ between dialects."""
    with db.session() as s:
        studies = s.execute(select(StudyRow.id, StudyRow.runs).where(StudyRow.owner == owner))
        return [sid for sid, runs in studies if any(r.get("job_id") == job_id for r in runs or [])]
