"""The job's life past Ray's view of it: a job going back to the queue (its workers never
started, or Ray lost it with its head), and the registration outbox (a succeeded job's
`registration` column, written "pending" in the same update as the succeeded state, then
worked off by the registrar)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func, select, update

from service.store.db import Database
from service.store.schema import JobRow, LogChunkRow, MetricRow

PENDING, DONE, FAILED = "pending", "done", "failed"


def now() -> datetime:
    return datetime.now(UTC)


def requeue(
    db: Database, job_id: str, expected: str, why: str, metrics_kept: int | None = None
) -> bool:
    """Compare-and-set `expected` -> queued, one more start retry. The copied log stays,
    closed by a marker line; the next attempt is a new Ray job whose log starts afresh, so
    its copy starts at offset 0 again and goes on after the marker. With `metrics_kept`, the
    copied metrics past that many rows go in the same write (the run goes on from a
    checkpoint and writes them again: jobs/records/restore.py)."""
    stamp = now()
    cut = {} if metrics_kept is None else {"metrics_count": metrics_kept}
    with db.session() as s:
        done = s.execute(
            update(JobRow)
            .where(JobRow.id == job_id, JobRow.status == expected)
            .values(
                status="queued",
                version=JobRow.version + 1,
                updated_at=stamp,
                requeued_at=stamp,
                start_retries=JobRow.start_retries + 1,
                started_at=None,
                ray_status=None,
                ray_message=None,
                unreachable_since=None,
                waiting_for=why[:2000],
                detail=why[:2000],  # kept while it waits again (admission rewrites waiting_for)
                queue_position=None,
                log_chars=0,
                **cut,
            )
        )
        if not done.rowcount:  # type: ignore[attr-defined]
            return False
        if metrics_kept is not None:
            s.execute(
                delete(MetricRow).where(MetricRow.job_id == job_id, MetricRow.seq >= metrics_kept)
            )
        last = s.scalar(select(func.max(LogChunkRow.seq)).where(LogChunkRow.job_id == job_id))
        s.add(LogChunkRow(job_id=job_id, seq=(last or 0) + 1, text=MARKER.format(why=why)))
    return True


MARKER = "\n[numtune: {why}]\n"


class RegistrationOutbox:
    def __init__(self, db: Database):
        self.db = db

    def due(self, limit: int = 20) -> list[JobRow]:
        """Pending registrations whose next attempt is due, oldest first."""
        query = (
            select(JobRow)
            .where(JobRow.registration_state == PENDING, JobRow.registration_next_at <= now())
            .order_by(JobRow.registration_next_at)
            .limit(limit)
        )
        with self.db.session() as s:
            return list(s.scalars(query))

    def _set(self, job_id: str, **values: Any) -> bool:
        """Write `values` on a job whose registration is still pending."""
        with self.db.session() as s:
            done = s.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.registration_state == PENDING)
                .values(updated_at=now(), **values)
            )
        return bool(done.rowcount)  # type: ignore[attr-defined]

    def done(self, job_id: str, attempts: int, model: str | None) -> bool:
        return self._set(
            job_id,
            registration_state=DONE,
            registration_attempts=attempts,
            registration_next_at=None,
            registered_model=model,
        )

    def retry(self, job_id: str, attempts: int, error: str, at: datetime) -> bool:
        return self._set(
            job_id,
            registration_attempts=attempts,
            registration_error=error[:2000],
            registration_next_at=at,
        )

    def failed(self, job_id: str, attempts: int, error: str) -> bool:
        return self._set(
            job_id,
            registration_state=FAILED,
            registration_attempts=attempts,
            registration_error=error[:2000],
            registration_next_at=None,
        )
