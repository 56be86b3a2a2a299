"""Queries on jobs (and tunes): create with idempotency, list, compare-and-set status,
and the copied metrics and logs. The only code that writes the `jobs` table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from service.jobs.states import ACTIVE, ALLOWED, TERMINAL, JobStatus
from service.store.db import Database
from service.store.job_rows import new_job, now
from service.store.pages import keyset_page
from service.store.schema import JobRow, LogChunkRow, MetricRow, SpecIn

# ray_status of a job cancelled while it was being submitted, until Ray confirms the stop.
STOPPING = "STOPPING"


class IdempotencyConflictError(Exception):
    """The Idempotency-Key was used before with another body."""


class JobStore:
    def __init__(self, db: Database):
        self.db = db

    # ---- create / read ------------------------------------------------------------------

    def create(
        self,
        *,
        kind: str,
        name: str,
        owner: str,
        spec: SpecIn,
        idempotency_key: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> tuple[JobRow, bool]:
        """Insert a queued job; with a key already used by this owner, return that job
        (False) when the body matches, else raise IdempotencyConflictError."""
        row = new_job(kind=kind, name=name, owner=owner, spec=spec, key=idempotency_key, meta=meta)
        digest = row.spec_sha256
        try:
            with self.db.session() as s:
                s.add(row)
            return row, True
        except IntegrityError:
            if idempotency_key is None:
                raise
        with self.db.session() as s:
            found = s.scalars(
                select(JobRow).where(
                    JobRow.owner == owner, JobRow.idempotency_key == idempotency_key
                )
            ).one()
        if found.spec_sha256 != digest:
            raise IdempotencyConflictError(
                f"Idempotency-Key {idempotency_key!r} was used for {found.id} with another body"
            )
        return found, False

    def get(self, job_id: str, owner: str | None = None) -> JobRow | None:
        """The job, or None if it does not exist or belongs to someone else (owner given)."""
        # A plain Core select: the hottest read, and a session's bookkeeping doubled it.
        with self.db.engine.connect() as connection:
            found = connection.execute(select(JobRow.__table__).where(JobRow.id == job_id)).first()
        if found is None or (owner is not None and found.owner != owner):
            return None
        return JobRow.of_columns(found._asdict())

    def page(
        self,
        *,
        kind: str,
        owner: str | None,
        status: str | None = None,
        name: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> tuple[list[JobRow], str | None]:
        """Newest first, keyset-paginated; the cursor names where the next page starts."""
        query = select(JobRow).where(JobRow.kind == kind)
        if owner is not None:
            query = query.where(JobRow.owner == owner)
        if status is not None:
            query = query.where(JobRow.status == status)
        if name is not None:
            query = query.where(JobRow.name == name)
        return keyset_page(self.db, query, JobRow, limit, cursor)

    def active(self) -> list[JobRow]:
        with self.db.session() as s:
            return list(
                s.scalars(
                    select(JobRow).where(JobRow.status.in_(ACTIVE)).order_by(JobRow.created_at)
                )
            )

    def stopping(self) -> list[JobRow]:
        """Cancelled jobs that Ray may still be running (a stop that has not got through)."""
        with self.db.session() as s:
            return list(
                s.scalars(
                    select(JobRow).where(
                        JobRow.status == "cancelled", JobRow.ray_status == STOPPING
                    )
                )
            )

    def submitted_since(self, when: datetime) -> Counter[str]:
        """Jobs handed to Ray since `when`, by owner: whose turn it has been lately."""
        with self.db.session() as s:
            rows = s.execute(
                select(JobRow.owner, func.count())
                .where(JobRow.submitted_at >= when)
                .group_by(JobRow.owner)
            ).all()
        return Counter({owner: n for owner, n in rows})

    def count_by_status(self) -> dict[tuple[str, str], int]:
        with self.db.session() as s:
            rows = s.execute(
                select(JobRow.kind, JobRow.status, func.count()).group_by(
                    JobRow.kind, JobRow.status
                )
            ).all()
        return {(kind, status): n for kind, status, n in rows}

    # ---- writes -------------------------------------------------------------------------

    def transition(self, job_id: str, expected: str, new: JobStatus, **fields: Any) -> bool:
        """Compare-and-set the status: True if it was `expected` and is now `new`."""
        if new not in ALLOWED.get(expected, ()):
            raise ValueError(f"no transition {expected} -> {new}")
        stamp = now()
        values: dict[str, Any] = {"status": new, "updated_at": stamp, **fields}
        values["version"] = JobRow.version + 1
        if new == "submitted":
            values.setdefault("submitted_at", stamp)
        if new == "running":
            values.setdefault("started_at", stamp)
        if new in TERMINAL:
            values.setdefault("finished_at", stamp)
        with self.db.session() as s:
            done = s.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.status == expected)
                .values(**values)
            )
        return bool(done.rowcount)  # type: ignore[attr-defined]

    def cancel(self, job_id: str, expected: str, by: str) -> bool:
        """Compare-and-set `expected` -> cancelled, saying who cancelled it."""
        return self.transition(job_id, expected, "cancelled", reason="cancelled", detail=f"by {by}")

    def set_fields(self, job_id: str, **fields: Any) -> None:
        """Fields outside the state machine (Ray's view, trials); never the status."""
        if "status" in fields:
            raise ValueError("status changes go through transition()")
        with self.db.session() as s:
            s.execute(update(JobRow).where(JobRow.id == job_id).values(**fields))

    def set_places(self, places: Sequence[tuple[str, int | None, str | None]]) -> None:
        """Queued jobs' (id, queue_position, waiting_for), in one transaction: a pass over
        thousands of queued jobs must not commit (and fsync) once per job."""
        if not places:
            return
        table = cast(Table, JobRow.__table__)
        jobs = table.c
        statement = (
            update(table)
            .where(jobs.id == bindparam("job_id"), jobs.status == "queued")
            .values(queue_position=bindparam("position"), waiting_for=bindparam("why"))
        )
        rows = [{"job_id": i, "position": p, "why": w} for i, p, w in places]
        with self.db.session() as s:
            s.execute(statement, rows)  # one executemany

    def delete_terminal(self, job_id: str) -> bool:
        with self.db.session() as s:
            s.execute(delete(MetricRow).where(MetricRow.job_id == job_id))
            s.execute(delete(LogChunkRow).where(LogChunkRow.job_id == job_id))
            done = s.execute(delete(JobRow).where(JobRow.id == job_id, JobRow.status.in_(TERMINAL)))
            if not done.rowcount:  # type: ignore[attr-defined]
                s.rollback()
                return False
        return True

    # ---- metrics and logs ---------------------------------------------------------------

    def add_metrics(self, job_id: str, first_seq: int, rows: Sequence[dict[str, Any]]) -> None:
        """Append reported rows seq first_seq.. (the reconciler copies only new ones)."""
        if not rows:
            return
        with self.db.session() as s:
            s.execute(
                insert(MetricRow),
                [
                    {
                        "job_id": job_id,
                        "seq": first_seq + i,
                        "step": row.get("step"),
                        "data": row,
                    }
                    for i, row in enumerate(rows)
                ],
            )
            s.execute(
                update(JobRow)
                .where(JobRow.id == job_id)
                .values(metrics_count=first_seq + len(rows))
            )

    def metrics(self, job_id: str) -> list[dict[str, Any]]:
        with self.db.session() as s:
            return list(
                s.scalars(
                    select(MetricRow.data).where(MetricRow.job_id == job_id).order_by(MetricRow.seq)
                )
            )

    def last_metrics(self, job_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each job's latest reported row, in one query (the dashboard's live job list)."""
        if not job_ids:
            return {}
        latest = (
            select(MetricRow.job_id, func.max(MetricRow.seq).label("seq"))
            .where(MetricRow.job_id.in_(job_ids))
            .group_by(MetricRow.job_id)
            .subquery()
        )
        query = select(MetricRow.job_id, MetricRow.data).join(
            latest, (MetricRow.job_id == latest.c.job_id) & (MetricRow.seq == latest.c.seq)
        )
        with self.db.session() as s:
            return {job_id: data for job_id, data in s.execute(query)}

    def add_log(self, job_id: str, offset: int, text: str) -> bool:
        """Append the log's characters from `offset` on, exactly once: False (nothing
        written) when another follower (a second API process) copied from there first."""
        if not text:
            return False
        with self.db.session() as s:
            # Compare-and-set on the copied length first: a concurrent copy of the same
            # offset waits on this row, then matches nothing.
            moved = s.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.log_chars == offset)
                .values(log_chars=offset + len(text))
            )
            if not moved.rowcount:  # type: ignore[attr-defined]
                return False
            last = s.scalar(select(func.max(LogChunkRow.seq)).where(LogChunkRow.job_id == job_id))
            s.add(LogChunkRow(job_id=job_id, seq=(last or 0) + 1, text=text))
        return True

    def log_chunks(
        self, job_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[tuple[int, str]]:
        with self.db.session() as s:
            rows = s.execute(
                select(LogChunkRow.seq, LogChunkRow.text)
                .where(LogChunkRow.job_id == job_id, LogChunkRow.seq > after_seq)
                .order_by(LogChunkRow.seq)
                .limit(limit)
            ).all()
        return [(seq, text) for seq, text in rows]

    def log_tail(self, job_id: str, chars: int, max_chunks: int = 64) -> str:
        """The last `chars` characters of the log as copied, from its newest chunks only
        (the dashboard polls it: reading a 20 MB log every second and a half would not do)."""
        with self.db.session() as s:
            rows = s.execute(
                select(LogChunkRow.text)
                .where(LogChunkRow.job_id == job_id)
                .order_by(LogChunkRow.seq.desc())
                .limit(max_chunks)
            ).all()
        return "".join(text for (text,) in reversed(rows))[-chars:]
