"""The store on both databases it supports: a SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from service.store import Database, IdempotencyConflictError, JobStore, TokenStore, migrate
from service.store.models import ModelStore
from tests.support.postgres import postgres_server


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'numtune.db'}"
    else:
        base = request.getfixturevalue("pg_url")
        name = f"t_{secrets.token_hex(4)}"
        admin = create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f"CREATE DATABASE {name}"))
        admin.dispose()
        url = base.rsplit("/", 1)[0] + f"/{name}"
    database = Database(url)
    migrate(database.engine)
    yield database
    database.dispose()


def new_job(store: JobStore, key: str | None = None, spec: dict | None = None, owner: str = "ann"):
    return store.create(
        kind="job", name="j", owner=owner, spec=spec or {"name": "j"}, idempotency_key=key
    )


def test_migrations_create_every_table_and_rerun_cleanly(db: Database) -> None:
    migrate(db.engine)  # a second run is a no-op
    tables = set(inspect(db.engine).get_table_names())
    assert {"jobs", "job_metrics", "job_logs", "tokens", "alembic_version"} <= tables
    if db.url.startswith("sqlite"):
        with db.engine.connect() as c:
            assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def test_idempotency_same_body_same_job_other_body_conflict(db: Database) -> None:
    store = JobStore(db)
    first, created = new_job(store, key="k1")
    again, created_again = new_job(store, key="k1")
    assert created and not created_again and again.id == first.id
    with pytest.raises(IdempotencyConflictError):
        new_job(store, key="k1", spec={"name": "other"})
    # Keys are per owner: another owner's identical key is a new job.
    theirs, created_theirs = new_job(store, key="k1", owner="bob")
    assert created_theirs and theirs.id != first.id


def test_status_is_compare_and_set(db: Database) -> None:
    store = JobStore(db)
    job, _ = new_job(store)
    assert store.transition(job.id, "queued", "submitted")
    assert not store.transition(job.id, "queued", "submitted")  # already moved on
    with pytest.raises(ValueError, match="no transition"):
        store.transition(job.id, "submitted", "queued")
    row = store.get(job.id)
    assert row is not None and row.status == "submitted" and row.version == 1


def test_concurrent_writers_exactly_one_wins(db: Database) -> None:
    store = JobStore(db)
    job, _ = new_job(store)
    store.transition(job.id, "queued", "submitted")
    wins: list[str] = []
    barrier = threading.Barrier(8)

    def race(target: str) -> None:
        barrier.wait()
        if store.transition(job.id, "submitted", target):
            wins.append(target)

    threads = [
        threading.Thread(target=race, args=(t,))
        for t in ["running", "cancelled", "failed", "succeeded"] * 2
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    row = store.get(job.id)
    assert len(wins) == 1 and row is not None and row.status == wins[0]


def test_pages_are_newest_first_and_complete(db: Database) -> None:
    store = JobStore(db)
    made = [new_job(store)[0].id for _ in range(7)]
    new_job(store, owner="bob")
    seen: list[str] = []
    cursor = None
    while True:
        rows, cursor = store.page(kind="job", owner="ann", limit=3, cursor=cursor)
        seen += [r.id for r in rows]
        if cursor is None:
            break
    assert sorted(seen) == sorted(made) and len(seen) == 7
    rows, _ = store.page(kind="job", owner=None, limit=50)
    assert len(rows) == 8
    assert store.page(kind="job", owner="ann", status="running")[0] == []


def test_metrics_logs_and_delete(db: Database) -> None:
    store = JobStore(db)
    job, _ = new_job(store)
    store.add_metrics(job.id, 0, [{"step": 1, "loss": 2.5}, {"step": 2, "loss": 2.0}])
    store.add_metrics(job.id, 2, [{"step": 3, "loss": 1.5}])
    assert store.add_log(job.id, 0, "one\n")
    assert store.add_log(job.id, 4, "two\n")
    row = store.get(job.id)
    assert row is not None and row.metrics_count == 3 and row.log_chars == 8
    assert [m["step"] for m in store.metrics(job.id)] == [1, 2, 3]
    assert [t for _, t in store.log_chunks(job.id)] == ["one\n", "two\n"]
    assert [t for _, t in store.log_chunks(job.id, after_seq=1)] == ["two\n"]
    assert not store.delete_terminal(job.id)  # queued: kept
    store.transition(job.id, "queued", "cancelled")
    assert store.delete_terminal(job.id)
    assert store.get(job.id) is None and store.metrics(job.id) == []


def test_tokens_hashed_scoped_and_revocable(db: Database) -> None:
    tokens = TokenStore(db)
    row, secret = tokens.create("ann", ["submit"])
    assert secret not in row.token_sha256 and len(row.token_sha256) == 64
    who = tokens.lookup(secret)
    assert who is not None and who.owner == "ann"
    assert who.allows("read") and who.allows("submit") and not who.allows("admin")
    assert tokens.lookup(secret + "x") is None
    assert tokens.revoke(row.id) and tokens.lookup(secret) is None
    with pytest.raises(ValueError, match="scopes"):
        tokens.create("ann", ["root"])


def test_a_log_offset_is_copied_once_by_concurrent_followers(db: Database) -> None:
    """Issue 13 item 14: two API processes copying the same new log text at once."""
    store = JobStore(db)
    job, _ = new_job(store)
    barrier = threading.Barrier(4, timeout=30)
    won: list[bool] = []

    def copy(text: str) -> None:
        barrier.wait()
        won.append(store.add_log(job.id, 0, text))

    threads = [threading.Thread(target=copy, args=(f"step 1\n{'x' * i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won) == [False, False, False, True]
    chunks = store.log_chunks(job.id)
    row = store.get(job.id)
    assert len(chunks) == 1 and row is not None and row.log_chars == len(chunks[0][1])
    assert not store.add_log(job.id, 0, "step 1\n")  # a follower a step behind


def test_migration_0003_keeps_one_version_per_checkpoint_and_drops_dangling_aliases(
    db: Database,
) -> None:
    """Databases written before 0003 may hold the very damage it prevents: a checkpoint
    registered twice, an alias on a deleted version. The upgrade repairs them, numbers on."""
    from alembic import command
    from alembic.config import Config

    from service.store.db import MIGRATIONS

    def to(revision: str, down: bool = False) -> None:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with db.engine.begin() as connection:
            config.attributes["connection"] = connection
            (command.downgrade if down else command.upgrade)(config, revision)

    to("0002", down=True)
    stamp = "2026-01-01 00:00:00"
    with db.engine.begin() as c:
        c.execute(text(f"INSERT INTO models VALUES ('arith', 'ann', '{stamp}')"))
        for version, job in ((1, "job-a"), (2, "job-a"), (3, "job-b")):  # job-a twice
            c.execute(
                text(
                    "INSERT INTO model_versions VALUES "
                    f"('arith', {version}, '{job}', '/s/{job}', 'registry/arith/v{version}', "
                    f"'{{}}', '{{}}', '{{}}', '{{}}', '{stamp}')"
                )
            )
        for alias, version in (("production", 2), ("stale", 7)):  # v7 was deleted
            c.execute(
                text(f"INSERT INTO model_aliases VALUES ('arith', '{alias}', {version}, '{stamp}')")
            )
    to("head")
    models = ModelStore(db)
    assert [(v.version, v.job_id) for v in models.versions("arith")] == [(1, "job-a"), (3, "job-b")]
    assert models.aliases("arith") == {"production": 1}  # moved off the duplicate; stale gone
    assert models.reserve_version("arith", "ann") == 4
