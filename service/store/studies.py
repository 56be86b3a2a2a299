"""Queries on studies: create one with all its first jobs in one transaction, read, list,
and compare-and-set every change (its runs, its status), so that the study loop and a
cancel from the API never overwrite each other. The only code that writes `studies`."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from jobs.spec import StudySpec
from service.store.db import Database
from service.store.job_rows import new_job, now, spec_digest
from service.store.jobs import IdempotencyConflictError
from service.store.pages import keyset_page
from service.store.schema import JobRow, MetricRow, SpecIn, StudyRow

FOLLOWED = ("running", "cancelling")  # what the study loop looks at on every pass
STUDY_TERMINAL = ("succeeded", "failed", "cancelled")


# (the study's entry for the job, kind, job name, spec): what is inserted for each job.
NewJobs = Sequence[tuple[dict[str, Any], str, str, SpecIn]]


@dataclass
class EndedJob:
    """A job a study takes over already ended (adopted from kept work, its files written
    under `job_id`): its row's columns, its metric rows, the job it was kept from."""

    job_id: str
    kept_from: str
    columns: dict[str, Any]
    metrics: list[dict[str, Any]] = field(default_factory=list)

    def row(self, kind: str, name: str, owner: str, spec: SpecIn) -> JobRow:
        row = new_job(kind=kind, name=name, owner=owner, spec=spec)
        row.id = self.job_id
        for key, value in {**self.columns, "metrics_count": len(self.metrics)}.items():
            setattr(row, key, value)
        return row


def _expanded(
    owner: str, jobs: NewJobs, ended: Mapping[int, EndedJob] | None = None
) -> tuple[list[JobRow], list[dict[str, Any]]]:
    """The job rows to insert, and the study's entry for each (its run plus kind and id;
    an adopted job's names the job it was kept from)."""
    rows, runs = [], []
    for i, (entry, kind, name, spec) in enumerate(jobs):
        done = (ended or {}).get(i)
        row = done.row(kind, name, owner, spec) if done else new_job(
            kind=kind, name=name, owner=owner, spec=spec
        )  # fmt: skip
        rows.append(row)
        kept = {"kept_from": done.kept_from} if done else {}
        runs.append({**entry, "kind": row.kind, "job_id": row.id, **kept})
    return rows, runs


def _metric_rows(ended: Mapping[int, EndedJob] | None) -> list[MetricRow]:
    return [
        MetricRow(job_id=done.job_id, seq=seq, step=data.get("step"), data=data)
        for done in (ended or {}).values()
        for seq, data in enumerate(done.metrics)
    ]


class StudyStore:
    def __init__(self, db: Database):
        self.db = db

    def create(
        self,
        *,
        name: str,
        owner: str,
        spec: StudySpec,
        jobs: NewJobs,
        key: str | None = None,
        ended: Mapping[int, EndedJob] | None = None,
    ) -> tuple[StudyRow, bool]:
        """Insert a running study and its jobs, each `(run, kind, name, spec)` with `run`
        the study's entry for it ({"arm", "seed"}), those in `ended` (by place) as they
        ended: all or nothing. With a key this owner used before, that study (False), or
        IdempotencyConflictError for another body."""
        stored = spec.model_dump(mode="json")
        digest = spec_digest("study", stored)
        rows, runs = _expanded(owner, jobs, ended)
        stamp = now()
        study = StudyRow(
            id=f"study-{secrets.token_hex(8)}",
            name=name,
            owner=owner,
            spec_json=stored,
            spec_sha256=digest,
            idempotency_key=key,
            status="running",
            runs=runs,
            version=0,
            created_at=stamp,
            updated_at=stamp,
        )
        study.keep_spec(spec)
        try:
            with self.db.session() as s:
                s.add(study)
                s.add_all(rows)
                s.flush()  # the jobs before their metric rows (a foreign key)
                s.add_all(_metric_rows(ended))
            return study, True
        except IntegrityError:
            if key is None:
                raise
        with self.db.session() as s:
            found = s.scalars(
                select(StudyRow).where(StudyRow.owner == owner, StudyRow.idempotency_key == key)
            ).one()
        if found.spec_sha256 != digest:
            raise IdempotencyConflictError(
                f"Idempotency-Key {key!r} was used for {found.id} with another body"
            )
        return found, False

    def get(self, study_id: str, owner: str | None = None) -> StudyRow | None:
        """The study, or None if it does not exist or belongs to someone else (owner given)."""
        with self.db.session() as s:
            row = s.get(StudyRow, study_id)
        if row is None or (owner is not None and row.owner != owner):
            return None
        return row

    def page(
        self, *, owner: str | None, limit: int = 50, cursor: str | None = None
    ) -> tuple[list[StudyRow], str | None]:
        """Newest first, keyset-paginated like jobs."""
        query = select(StudyRow)
        if owner is not None:
            query = query.where(StudyRow.owner == owner)
        return keyset_page(self.db, query, StudyRow, limit, cursor)

    def followed(self) -> list[StudyRow]:
        with self.db.session() as s:
            return list(
                s.scalars(
                    select(StudyRow)
                    .where(StudyRow.status.in_(FOLLOWED))
                    .order_by(StudyRow.created_at)
                )
            )

    def jobs_of(self, study: StudyRow) -> dict[str, JobRow]:
        """The rows of the study's jobs that still exist, by id (one query)."""
        ids = [run["job_id"] for run in study.runs]
        with self.db.session() as s:
            return {r.id: r for r in s.scalars(select(JobRow).where(JobRow.id.in_(ids)))}

    def add_runs(self, study: StudyRow, jobs: NewJobs) -> bool:
        """Append jobs to a running study, all or nothing; False (nothing written) when the
        study changed since `study` was read (cancelled, or another pass added them)."""
        rows, runs = _expanded(study.owner, jobs)
        with self.db.session() as s:
            moved = s.execute(
                update(StudyRow)
                .where(
                    StudyRow.id == study.id,
                    StudyRow.version == study.version,
                    StudyRow.status == "running",
                )
                .values(runs=[*study.runs, *runs], version=study.version + 1, updated_at=now())
            )
            if not moved.rowcount:  # type: ignore[attr-defined]
                return False
            s.add_all(rows)
        return True

    def transition(self, study_id: str, expected: str, new: str, **fields: Any) -> bool:
        """Compare-and-set the status: True if it was `expected` and is now `new`."""
        stamp = now()
        values: dict[str, Any] = {"status": new, "updated_at": stamp, **fields}
        values["version"] = StudyRow.version + 1
        if new in STUDY_TERMINAL:
            values["finished_at"] = stamp
        with self.db.session() as s:
            done = s.execute(
                update(StudyRow)
                .where(StudyRow.id == study_id, StudyRow.status == expected)
                .values(**values)
            )
        return bool(done.rowcount)  # type: ignore[attr-defined]
