"""The reconciler's lease on both databases: a PostgreSQL advisory lock and an flock next
to the SQLite file. One holder at a time; free again when the holder releases it or its
process dies (SIGKILL included)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.store import Database, exclusive, make_lease
from tests.support.postgres import postgres_server

REPO = Path(__file__).resolve().parents[2]
HOLD = """
import sys, time
from service.store import Database, make_lease
lease = make_lease(Database(sys.argv[1]), "reconciler")
assert lease.acquire()
print("held", flush=True)
time.sleep(600)
"""


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'numtune.db'}"
    return str(request.getfixturevalue("pg_url"))


def test_one_holder_until_it_releases(url: str) -> None:
    # Two Databases: two engines, as two API processes would have.
    first, second = make_lease(Database(url), "reconciler"), make_lease(Database(url), "reconciler")
    assert first.acquire()
    assert not second.acquire()
    assert first.acquire()  # still held: checking it does not lose it
    assert not second.acquire()
    first.release()
    assert second.acquire()
    assert not first.acquire()
    second.release()


def test_names_are_separate_locks(url: str) -> None:
    db = Database(url)
    reconciler = make_lease(db, "reconciler")
    assert reconciler.acquire()
    with exclusive(Database(url), "startup"):  # not held up by the reconciler's lease
        assert not make_lease(Database(url), "reconciler").acquire()
    reconciler.release()


def test_a_killed_holder_frees_it_within_seconds(url: str) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, url], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        waiting = make_lease(Database(url), "reconciler")
        assert not waiting.acquire()
        os.kill(holder.pid, signal.SIGKILL)
        killed = time.monotonic()
        while not waiting.acquire():
            assert time.monotonic() - killed < 10, "the lease never came free"
            time.sleep(0.1)
        print(f"taken over {time.monotonic() - killed:.2f} s after SIGKILL")
        waiting.release()
    finally:
        holder.kill()
        holder.wait()


def test_in_memory_database_lease_is_this_process() -> None:
    lease = make_lease(Database("sqlite://"), "reconciler")
    assert lease.acquire() and lease.acquire()
