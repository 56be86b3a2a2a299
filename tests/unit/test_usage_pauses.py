"""Compute usage across pauses (issue 47 items 1-3 together): a paused job's time in the
pause is never use — so a preempted job does not pay for being preempted — and its runs
before a resume still count once it runs again. Real SQLite through the real stores; the
clock is moved by rewriting the rows' stamps, as time would have."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobs.spec import JobSpec
from service.queue.usage import in_window, running_seconds
from service.store import Database, JobStore, migrate
from service.store.job_rows import new_job
from service.store.pauses import PauseStore
from tests.unit.api_cases import GOOD

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
HOUR = NOW - timedelta(hours=1)


def row(**stamps: Any) -> Any:
    made = new_job(kind="job", name="j", owner="ann", spec=JobSpec.model_validate(GOOD))
    made.ran_seconds = 0.0
    for name, value in stamps.items():
        setattr(made, name, value)
    return made


def minutes(**stamps: Any) -> float:
    """Running minutes of a row with these stamps inside the hour before NOW."""
    return running_seconds(row(**stamps), HOUR, NOW) / 60


def ago(m: float) -> datetime:
    return NOW - timedelta(minutes=m)


def test_the_pause_is_not_use_and_the_runs_before_a_resume_are() -> None:
    assert minutes(started_at=ago(50)) == 50  # running, never paused
    assert minutes(started_at=ago(50), ran_until=ago(20)) == 30  # paused 20 minutes ago
    # Paused, then cancelled while paused: it ended at its pause, not at the cancel.
    assert minutes(started_at=ago(50), ran_until=ago(20), finished_at=ago(5)) == 30
    # Ran 20 minutes, paused 40 minutes ago, resumed, running again for 10.
    assert minutes(started_at=ago(10), ran_until=ago(40), ran_seconds=1200) == 30
    # Resumed and still queued: its 10 minutes before the pause.
    assert minutes(ran_until=ago(5), ran_seconds=600) == 10
    # Paused twice: 10 minutes before the first pause, then 10 more before this one.
    assert minutes(started_at=ago(30), ran_until=ago(20), ran_seconds=600) == 20


def test_only_what_ran_inside_the_window_counts() -> None:
    # Its 30 earlier minutes ended 40 minutes ago; a window of the last 45 minutes holds
    # at most 5 of them, and the 10 it has run since.
    resumed = row(started_at=ago(10), ran_until=ago(40), ran_seconds=1800)
    assert running_seconds(resumed, ago(45), NOW) == 15 * 60
    # Runs that ended before the window count nothing.
    assert running_seconds(row(ran_until=ago(90), ran_seconds=1800), HOUR, NOW) == 0


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[Database, JobStore, PauseStore]]:
    db = Database(f"sqlite:///{tmp_path / 'numtune.db'}")
    migrate(db.engine)
    yield db, JobStore(db), PauseStore(db)
    db.dispose()


def test_pause_and_resume_keep_the_running_time_in_the_store(
    stores: tuple[Database, JobStore, PauseStore],
) -> None:
    db, jobs, pauses = stores
    made, _ = jobs.create(kind="job", name="j", owner="ann", spec=JobSpec.model_validate(GOOD))
    assert jobs.transition(made.id, "queued", "submitted")
    assert jobs.transition(made.id, "submitted", "running")
    jobs.set_fields(made.id, started_at=datetime.now(UTC) - timedelta(seconds=100))
    assert pauses.request(made.id, "running", "ann")
    assert pauses.paused(made.id, "running", "ckpt", "paused at step 3")

    def used() -> float:
        (found,) = in_window(db, 3600, None, owners=["ann"])
        return found.seconds

    assert used() == pytest.approx(100, abs=2)
    jobs.set_fields(made.id, ran_until=datetime.now(UTC) - timedelta(seconds=50))
    assert used() == pytest.approx(50, abs=2)  # the 50 s since its pause are not use
    assert pauses.resume(made.id, "ann")
    resumed = jobs.get(made.id)
    assert resumed is not None and resumed.started_at is None and resumed.status == "queued"
    assert resumed.ran_seconds == pytest.approx(50, abs=2)  # kept across the resume
    assert used() == pytest.approx(50, abs=2)  # counted while it waits in the queue
