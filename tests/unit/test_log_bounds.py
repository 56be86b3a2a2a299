"""Issue 13 items 14 and 15: each log line is copied exactly once, and logs and metrics
stay bounded. A per-job log cap with a marker (and Ray no longer asked past it),
driver.log written once at the end, metrics.jsonl appended to, the whole log streamed in
pages, and log streams capped, re-authorised and ended."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.records.models import METRICS
from jobs.records.run_files import RunFiles, complete_lines
from jobs.train.steplog import StepLog
from service.app import create_app
from service.jobs.logstream import PAGE, follow_log
from service.jobs.reconciler import Reconciler
from service.settings import Settings
from service.store import Database, JobStore, migrate
from tests.support.stub_backend import StubBackend

ADMIN = "adm_Lb3nRx7Qw2Kp9Zt5Vm1Hd8Sy4Cj6Gf0E"
H = {"Authorization": f"Bearer {ADMIN}"}
GOOD = {"name": "tiny", "model": {"source": "random:tiny-digit"}}


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend()


def make_client(tmp_path: Path, backend: StubBackend, **settings: Any) -> Iterator[TestClient]:
    config = Settings(
        home=tmp_path,
        admin_token=ADMIN,
        storage=str(tmp_path / "storage"),
        reconcile_interval_s=0.01,
        token_cache_s=0,
        **settings,
    )
    with TestClient(create_app(config, backend=backend, reconcile=False)) as c:
        yield c


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    yield from make_client(tmp_path, backend, max_log_chars=1000)


def running_job(client: TestClient) -> str:
    job_id = str(client.post("/v1/jobs", json=GOOD, headers=H).json()["id"])
    for _ in range(2):
        client.app.state.reconciler.run_once()  # type: ignore[attr-defined]
    return job_id


def test_a_log_past_the_cap_is_cut_with_a_marker_and_ray_is_asked_no_more(
    client: TestClient, backend: StubBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    reconciler = client.app.state.reconciler  # type: ignore[attr-defined]
    job_id = running_job(client)
    backend.log_text = "".join(f"step {i}\n" for i in range(400))  # ~3,500 characters
    reconciler.run_once()
    log = client.get(f"/v1/jobs/{job_id}/logs", headers=H).text
    assert log.startswith(backend.log_text[:1000])
    assert log.endswith("cut here at 1000 characters; Ray's job log has the rest]\n")
    asked = []
    monkeypatch.setattr(backend, "logs", lambda i: asked.append(i) or backend.log_text)
    for _ in range(3):
        reconciler.run_once()
    assert asked == []  # no more whole-log fetches for a capped log
    run = Path(client.app.state.services.settings.storage_root) / "runs" / job_id  # type: ignore[attr-defined]
    assert not (run / "driver.log").exists()  # not rewritten on every pass
    backend.statuses[job_id] = "FAILED"
    reconciler.run_once()
    assert asked == [job_id]  # once more at the end, for the failure reason
    assert (run / "driver.log").read_text() == log  # written once, at the end


def test_the_whole_log_is_read_page_by_page(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = running_job(client)
    store = client.app.state.services.jobs  # type: ignore[attr-defined]
    pieces = [f"line {i}\n" for i in range(2 * PAGE + 5)]
    offset = 0
    for piece in pieces:
        assert store.add_log(job_id, offset, piece)
        offset += len(piece)
    sizes: list[int] = []
    chunks = store.log_chunks

    def counted(*args: Any, **kwargs: Any) -> list[tuple[int, str]]:
        found = chunks(*args, **kwargs)
        sizes.append(len(found))
        return found

    monkeypatch.setattr(store, "log_chunks", counted)
    assert client.get(f"/v1/jobs/{job_id}/logs", headers=H).text == "".join(pieces)
    assert max(sizes) == PAGE and len(sizes) == 4  # three pages and the empty end


def test_metrics_are_appended_not_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = RunFiles.for_job("job-metrics", str(tmp_path))
    files.write_text(METRICS, json.dumps({"step": 1}) + "\n")  # a resumed run's rows
    steplog = StepLog(files)

    def no_rewrite(name: str, text: str) -> None:
        raise AssertionError(f"{name} rewritten whole")

    monkeypatch.setattr(RunFiles, "write_text", no_rewrite)
    for step in (2, 3):
        steplog.put({"step": step, "loss": 1.0})
    steplog.flush()
    rows = [json.loads(line) for line in complete_lines(files.read_text(METRICS) or "")]
    assert [r["step"] for r in rows] == [1, 2, 3]
    # A reader meeting a line still being written takes only the complete ones.
    assert complete_lines('{"step": 1}\n{"st') == ['{"step": 1}']


def test_log_streams_are_capped_per_owner_and_end_at_their_time_limit(
    tmp_path: Path, backend: StubBackend
) -> None:
    for client in make_client(tmp_path, backend, max_log_streams_per_owner=1, log_stream_max_s=0.5):
        job_id = running_job(client)
        url = f"/v1/jobs/{job_id}/logs?follow=true"
        with client.stream("GET", url, headers=H) as first:
            second = client.get(url, headers=H)
            assert second.status_code == 429
            assert second.json()["error"] == "too_many_requests"
            text = "".join(first.iter_text())  # a job stuck in running: ends by the limit
        end = text.strip().split("\n\n")[-1]
        assert end.startswith("event: end") and "time limit" in end and '"running"' in end
        with client.stream("GET", url, headers=H) as again:  # the slot was given back
            assert again.status_code == 200


def test_a_stream_ends_when_its_token_is_revoked(tmp_path: Path, backend: StubBackend) -> None:
    # The time limit only bounds a failure here (the stream would end with `end`).
    for client in make_client(tmp_path, backend, log_stream_recheck_s=0.01, log_stream_max_s=60):
        job_id = running_job(client)
        made = client.post("/v1/tokens", json={"owner": "admin", "scopes": ["read"]}, headers=H)
        reader = {"Authorization": f"Bearer {made.json()['token']}"}
        with client.stream("GET", f"/v1/jobs/{job_id}/logs?follow=true", headers=reader) as r:
            assert r.status_code == 200
            revoked = client.delete(f"/v1/tokens/{made.json()['id']}", headers=H)
            assert revoked.status_code == 204
            text = "".join(r.iter_text())  # ends by itself: the job is still running
        assert text.strip().split("\n\n")[-1].startswith("event: error")
        assert "token revoked" in text


def test_follow_asks_again_and_stops_on_a_no(client: TestClient) -> None:
    job_id = running_job(client)
    store = client.app.state.services.jobs  # type: ignore[attr-defined]
    answers = iter([True, True, False])
    asked: list[bool] = []

    async def allowed() -> bool:
        asked.append(next(answers))
        return asked[-1]

    async def collect() -> list[str]:
        stream = follow_log(store, job_id, 0.001, allowed=allowed, recheck_s=0.0)
        return [event async for event in stream]

    events = asyncio.run(collect())
    assert asked == [True, True, False] and events[-1].startswith("event: error")


def test_two_api_processes_copy_each_log_line_exactly_once(tmp_path: Path) -> None:
    """Item 14: two reconcilers (two API processes) on one database, one a step behind."""
    url = f"sqlite:///{tmp_path / 'numtune.db'}"
    databases = [Database(url), Database(url)]
    migrate(databases[0].engine)
    stores = [JobStore(db) for db in databases]
    backend = StubBackend()
    first, second = (Reconciler(s, backend, str(tmp_path / "storage")) for s in stores)
    job, _ = stores[0].create(kind="job", name="tiny", owner="ann", spec=GOOD)
    stores[0].transition(job.id, "queued", "submitted")
    read_by_both = stores[0].get(job.id)
    assert read_by_both is not None
    backend.log_text = "step 1\n"
    first.follow(read_by_both)
    backend.log_text += "step 2\n"
    second.follow(read_by_both)  # read the row before the first one's copy landed
    backend.log_text += "step 3\n"
    for reconciler_ in (second, first):
        fresh = stores[1].get(job.id)
        assert fresh is not None
        reconciler_.follow(fresh)
    copied = "".join(text for _, text in stores[1].log_chunks(job.id))
    assert copied == "step 1\nstep 2\nstep 3\n"
    for db in databases:
        db.dispose()
