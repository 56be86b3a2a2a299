"""Pause and resume as the database sees them: compare-and-set writes on the job, each with
its event (who asked, when, what happened) in the same transaction.

A pause of a queued job holds it (queued -> paused). A pause of a submitted or running job
is first a request (`pause_requested_at`): the reconciler hands it to the run, which stops at
its next step boundary with a checkpoint, and then records the pause (-> paused). A resume
puts a paused job back in the queue (paused -> queued) as a new Ray submission
(`resumes` + 1: its `ray_id`) whose log copy starts afresh after a marker line.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, Text, func, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from service.store.db import Database
from service.store.schema import Base, JobRow, LogChunkRow, UTCDateTime

MARKER = "\n----- numtune: {why} -----\n"


class EventRow(Base):
    """Something done to a job that its status alone does not tell: a pause asked for, a
    pause done (with its checkpoint), a resume; `by` is the owner who asked, or numtune."""

    __tablename__ = "job_events"
    __table_args__ = (Index("ix_job_events_job", "job_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    # pause_requested | paused | resumed | preempted (asked to pause for another job) |
    # preempting (on the job that others were asked to pause for)
    kind: Mapped[str] = mapped_column(String(32))
    by: Mapped[str] = mapped_column(String(63))
    detail: Mapped[str | None] = mapped_column(Text)


def now() -> datetime:
    return datetime.now(UTC)


def _last_run_seconds(row: JobRow | None) -> float:
    """How long a paused job's last run ran: from its start to its pause (0 for a job
    held while queued, which never started)."""
    if row is None or row.started_at is None or row.ran_until is None:
        return 0.0
    return max(0.0, (row.ran_until - row.started_at).total_seconds())


class PauseStore:
    def __init__(self, db: Database):
        self.db = db

    def events(self, job_id: str) -> list[EventRow]:
        """The job's events, oldest first."""
        with self.db.session() as s:
            query = select(EventRow).where(EventRow.job_id == job_id).order_by(EventRow.id)
            return list(s.scalars(query))

    def _write(
        self, s: Session, job_id: str, where: Any, event: tuple[str, str, str | None], **values: Any
    ) -> bool:
        stamp = now()
        done = s.execute(
            update(JobRow)
            .where(JobRow.id == job_id, where)
            .values(updated_at=stamp, version=JobRow.version + 1, **values)
        )
        if not done.rowcount:  # type: ignore[attr-defined]
            return False
        kind, by, detail = event
        s.add(EventRow(job_id=job_id, at=stamp, kind=kind, by=by, detail=detail))
        return True

    def request(self, job_id: str, expected: str, by: str) -> bool:
        """Ask a submitted or running job to pause (once: a second ask changes nothing)."""
        where = (JobRow.status == expected) & JobRow.pause_requested_at.is_(None)
        with self.db.session() as s:
            event = ("pause_requested", by, "at the next step boundary")
            return self._write(s, job_id, where, event, pause_requested_at=now())

    def preempt(self, job_id: str, expected: str, for_job: str, why: str) -> bool:
        """Ask a running job to pause for `for_job` (the scheduler's pause: once paused it
        goes back in the queue by itself); an event on both jobs."""
        where = (JobRow.status == expected) & JobRow.pause_requested_at.is_(None)
        with self.db.session() as s:
            if not self._write(
                s, job_id, where, ("preempted", "numtune", why), pause_requested_at=now()
            ):
                return False
            s.add(EventRow(job_id=for_job, at=now(), kind="preempting", by="numtune", detail=why))
            return True

    def preempted(self, job_id: str) -> bool:
        """Whether the job's last pause request was the scheduler's (not its owner's)."""
        asked = ("pause_requested", "preempted")
        with self.db.session() as s:
            last = s.scalar(
                select(EventRow.kind)
                .where(EventRow.job_id == job_id, EventRow.kind.in_(asked))
                .order_by(EventRow.id.desc())
                .limit(1)
            )
        return last == "preempted"

    def note(self, job_id: str, kind: str, by: str, detail: str) -> None:
        """An event alone (the job's state unchanged): an owner's pause of a job that the
        scheduler is pausing already, so that it stays paused."""
        with self.db.session() as s:
            s.add(EventRow(job_id=job_id, at=now(), kind=kind, by=by, detail=detail))

    def hold(self, job_id: str, by: str) -> bool:
        """queued -> paused: it is not admitted until resumed."""
        with self.db.session() as s:
            event = ("paused", by, "held in the queue")
            return self._write(
                s,
                job_id,
                JobRow.status == "queued",
                event,
                status="paused",
                queue_position=None,
                waiting_for=None,
            )

    def paused(self, job_id: str, expected: str, checkpoint: str | None, detail: str) -> bool:
        """The run stopped at a step boundary with `checkpoint`: expected -> paused."""
        with self.db.session() as s:
            return self._write(
                s,
                job_id,
                JobRow.status == expected,
                ("paused", "numtune", detail),
                status="paused",
                paused_checkpoint=checkpoint,
                pause_requested_at=None,
                ran_until=now(),  # it stopped running: the pause is not use
            )

    def resume(self, job_id: str, by: str) -> bool:
        """paused -> queued, as a new Ray submission that continues from the checkpoint."""
        with self.db.session() as s:
            row = s.get(JobRow, job_id)
            checkpoint = row.paused_checkpoint if row is not None else None
            ran = _last_run_seconds(row)
            detail = f"from {checkpoint}" if checkpoint else "back in the queue"
            done = self._write(
                s,
                job_id,
                JobRow.status == "paused",
                ("resumed", by, detail),
                status="queued",
                resumes=JobRow.resumes + 1,
                pause_requested_at=None,
                started_at=None,  # its time limit counts running time, not time paused
                ran_seconds=JobRow.ran_seconds + ran,  # its use so far, kept for quotas
                ray_status=None,
                ray_message=None,
                unreachable_since=None,
                queue_position=None,
                waiting_for=None,
                log_chars=0,  # the new Ray job's log starts at 0, after the marker
            )
            if done:
                last = s.scalar(
                    select(func.max(LogChunkRow.seq)).where(LogChunkRow.job_id == job_id)
                )
                why = f"resumed by {by} ({detail})"
                s.add(LogChunkRow(job_id=job_id, seq=(last or 0) + 1, text=MARKER.format(why=why)))
            return done
