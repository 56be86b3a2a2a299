"""Locks between API processes that share one database: the reconciler's lease (exactly one
process follows jobs; another takes over within a retry interval of the holder's death) and
the startup lock (migrations and the admin token, one process at a time).

PostgreSQL: a session advisory lock on a connection kept for the lease's lifetime; the
server drops it with the connection, so a holder killed with SIGKILL frees it as soon as
its socket closes. SQLite file: an flock on a file next to the database; the kernel drops
it with the process. An in-memory SQLite database is seen by one process only, so its
lease is always held (settings refuse several workers on one).

The lease is the guard against doing the work twice, not the only one: every status write
is compare-and-set and Ray refuses a second submission of one job id, so a holder that lost
its lease mid-pass (a dropped connection) cannot corrupt a record.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

from service.store.db import Database, sqlite_path

log = logging.getLogger(__name__)


class Lease(Protocol):
    def acquire(self, wait: bool = False) -> bool:
        """True while this process holds it: takes it when free (or waits for it), and
        checks that a lease already held still is."""
        ...

    def release(self) -> None: ...


def advisory_key(name: str) -> int:
    """A stable signed 64-bit key per lock name (PostgreSQL's advisory keys are bigint)."""
    return int.from_bytes(
        hashlib.sha256(f"numtune:{name}".encode()).digest()[:8], "big", signed=True
    )


class PgAdvisoryLease:
    def __init__(self, engine: Engine, name: str):
        self.engine = engine
        self.key = advisory_key(name)
        self._conn: Connection | None = None

    def acquire(self, wait: bool = False) -> bool:
        try:
            if self._conn is not None:
                self._conn.execute(text("SELECT 1"))  # alive: the session still holds it
                return True
            conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            call = "pg_advisory_lock" if wait else "pg_try_advisory_lock"
            got = conn.execute(text(f"SELECT {call}(:key)"), {"key": self.key}).scalar()
            if wait or got:
                self._conn = conn
                return True
            conn.close()
            return False
        except SQLAlchemyError as error:
            # The connection (and with it the lock) is gone, or the database is down.
            self._drop()
            if wait:
                raise  # a start that cannot reach its database says why
            log.warning("lease %d: database error: %s", self.key, error)
            return False

    def release(self) -> None:
        if self._conn is None:
            return
        try:
            self._conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": self.key})
            self._conn.close()
        except SQLAlchemyError:
            self._drop()  # a lost connection has released it already
        self._conn = None

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(SQLAlchemyError):
                self._conn.invalidate()  # never back into the pool: its session is suspect
                self._conn.close()
        self._conn = None


class FileLease:
    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self, wait: bool = False) -> bool:
        if self._fd is not None:
            return True  # an flock lasts as long as its descriptor
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        # Who holds it, for a person looking; the lock itself is the flock.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


class ProcessLease:
    """An in-memory database: no other process can see it, so nobody else can hold it."""

    def acquire(self, wait: bool = False) -> bool:
        return True

    def release(self) -> None:
        return None


def make_lease(db: Database, name: str) -> Lease:
    if db.engine.dialect.name == "postgresql":
        return PgAdvisoryLease(db.engine, name)
    if db.engine.dialect.name != "sqlite":
        raise ValueError(f"no lease for a {db.engine.dialect.name} database")
    path = sqlite_path(db.url)
    if path is None:
        return ProcessLease()
    return FileLease(path.with_name(f"{path.name}.{name}.lock"))


@contextlib.contextmanager
def exclusive(db: Database, name: str) -> Iterator[None]:
    """Hold lock `name` for the block, waiting for it as long as another process has it."""
    lease = make_lease(db, name)
    if not lease.acquire(wait=True):
        raise RuntimeError(f"could not take the {name} lock of the database")
    try:
        yield
    finally:
        lease.release()
