"""Issue 13: the reconciler survives faults (items 9, 10, the fault test), a cancel never
hides an outcome Ray already reported (item 13), and the wall-clock limit (issue 14
item 8) ends a job `failed`/`timeout`. Ray is stubbed at the backend boundary."""

from __future__ import annotations

import asyncio
import errno
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.records.run_files import RunFiles
from service.app import create_app
from service.backends.ray_backend import RayUnreachableError
from service.jobs.logstream import follow_log
from service.jobs.reconciler import Reconciler
from service.settings import Settings
from service.store import JobStore
from tests.support.stub_backend import StubBackend

ADMIN = "adm_Re4kWq8Nz1Vx6Bt3Yp9Lc2Hs7Dm5Gf0J"
H = {"Authorization": f"Bearer {ADMIN}"}
GOOD = {"name": "tiny", "model": {"source": "random:tiny-digit"}}
PATIENCE = 500  # passes a test allows for a backoff to run out before it gives up


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend()


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    settings = Settings(
        home=tmp_path, admin_token=ADMIN, reconcile_interval_s=0.001, submit_attempts=3
    )
    with TestClient(create_app(settings, backend=backend, reconcile=False)) as c:
        yield c


def reconciler(client: TestClient) -> Reconciler:
    found: Reconciler = client.app.state.reconciler  # type: ignore[attr-defined]
    return found


def store(client: TestClient) -> JobStore:
    found: JobStore = client.app.state.services.jobs  # type: ignore[attr-defined]
    return found


def post(client: TestClient, spec: dict[str, Any] = GOOD) -> str:
    r = client.post("/v1/jobs", json=spec, headers=H)
    assert r.status_code == 202, r.text
    return str(r.json()["id"])


def get(client: TestClient, job_id: str) -> dict[str, Any]:
    out: dict[str, Any] = client.get(f"/v1/jobs/{job_id}", headers=H).json()
    return out


def passes_until(client: TestClient, job_id: str, done: Any) -> dict[str, Any]:
    """Run passes (sleeping a little, so backoffs run out) until done(record)."""
    for _ in range(PATIENCE):
        reconciler(client).run_once()
        job = get(client, job_id)
        if done(job):
            return job
        time.sleep(0.002)
    raise AssertionError(f"{job_id} never got there: {get(client, job_id)}")


def test_an_unreachable_ray_while_stopping_a_job_cancelled_mid_submit_stops_nothing_else(
    client: TestClient, backend: StubBackend
) -> None:
    first = post(client)
    original_submit = backend.submit

    def submit_while_cancelled(job_id: str, kind: str, spec_json: str, ray_id: str) -> None:
        original_submit(job_id, kind, spec_json, ray_id)
        # The API's cancel lands while the submission is on its way, and then Ray goes.
        assert client.post(f"/v1/jobs/{job_id}/cancel", headers=H).status_code == 202
        backend.stop_error = RayUnreachableError("stub: Ray went away")

    backend.submit = submit_while_cancelled  # type: ignore[method-assign]
    reconciler(client).run_once()  # raised RayUnreachableError out of the loop before
    backend.submit = original_submit  # type: ignore[method-assign]
    assert get(client, first)["status"] == "cancelled" and backend.stopped == []
    later = post(client)
    reconciler(client).run_once()
    assert later in backend.submitted  # the loop goes on with other jobs
    backend.stop_error = None  # Ray answers again: the stop that failed is retried
    passes_until(client, first, lambda job: first in backend.stopped)
    assert backend.stopped == [first]
    assert get(client, first)["ray_status"] == "STOPPED"


def test_the_loop_outlives_a_failing_pass_and_readyz_reports_a_stall(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = reconciler(client)
    calls = {"n": 0}
    gate = threading.Event()
    active = loop.store.active

    def flaky() -> list[Any]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug in one pass")
        if calls["n"] == 3:
            gate.wait()  # a pass that hangs (e.g. a call that never returns)
        return active()

    monkeypatch.setattr(loop.store, "active", flaky)
    loop.start()
    try:
        for _ in range(PATIENCE):
            if calls["n"] >= 3:
                break
            time.sleep(0.01)
        assert calls["n"] >= 3 and loop.passes >= 1  # went on after the failing pass
        loop.last_pass -= 3600  # an hour without a pass completing
        r = client.get("/readyz", headers=H)
        assert r.status_code == 503
        assert r.json()["checks"]["reconciler"].startswith("error: stalled")
    finally:
        gate.set()
        loop.stop()


def test_a_submission_failing_on_storage_ends_the_job_and_its_followers(
    client: TestClient, backend: StubBackend
) -> None:
    backend.submit_error = OSError(errno.ENOSPC, "No space left on device")
    job_id = post(client)
    reconciler(client).run_once()
    retrying = get(client, job_id)
    assert retrying["status"] == "queued"
    assert "retrying submission (1 of 3 failed" in retrying["waiting_for"]
    done = passes_until(client, job_id, lambda job: job["status"] != "queued")
    assert done["status"] == "failed" and done["reason"] == "storage_error"
    assert "No space left on device" in done["detail"]

    async def follow() -> list[str]:
        return [event async for event in follow_log(store(client), job_id, 0.001)]

    assert asyncio.run(follow())[-1] == 'event: end\ndata: {"status": "failed"}\n\n'


def test_ray_down_while_jobs_are_queued_submitted_and_cancelling(
    client: TestClient, backend: StubBackend
) -> None:
    running = post(client)
    reconciler(client).run_once()
    reconciler(client).run_once()
    assert get(client, running)["status"] == "running"
    cancelling = post(client)
    original_submit = backend.submit

    def submit_then_cancel(job_id: str, kind: str, spec_json: str, ray_id: str) -> None:
        original_submit(job_id, kind, spec_json, ray_id)
        client.post(f"/v1/jobs/{job_id}/cancel", headers=H)
        backend.reachable = False  # Ray stops right after

    backend.submit = submit_then_cancel  # type: ignore[method-assign]
    reconciler(client).run_once()
    backend.submit = original_submit  # type: ignore[method-assign]
    queued = post(client)
    for _ in range(5):
        reconciler(client).run_once()
    ready = client.get("/readyz", headers=H)
    assert ready.status_code == 503 and ready.json()["checks"]["ray"].startswith("error")
    assert get(client, queued)["status"] == "queued"
    assert "unreachable" in get(client, queued)["waiting_for"]
    assert get(client, running)["status"] == "running"  # kept, within the unreachable limit
    backend.reachable = True
    backend.statuses[running] = "STOPPED"
    passes_until(client, cancelling, lambda job: job["ray_status"] == "STOPPED")
    assert get(client, running)["status"] == "cancelled"
    assert get(client, queued)["status"] == "submitted" and queued in backend.submitted
    assert client.get("/readyz", headers=H).status_code == 200


def finished_run(storage: str, job_id: str) -> None:
    result = {"status": "succeeded", "reason": None, "detail": None,
              "best_checkpoint": None, "metrics": {"eval_exact_match": 0.5}}  # fmt: skip
    RunFiles.for_job(job_id, storage).write_text("result.json", json.dumps(result))


def test_cancel_after_ray_reported_success_keeps_the_success(
    client: TestClient, backend: StubBackend
) -> None:
    job_id = post(client)
    reconciler(client).run_once()
    reconciler(client).run_once()
    finished_run(client.app.state.services.settings.storage_root, job_id)  # type: ignore[attr-defined]
    backend.statuses[job_id] = "SUCCEEDED"  # Ray knows; our next pass has not come yet
    r = client.post(f"/v1/jobs/{job_id}/cancel", headers=H)
    assert r.status_code == 409 and "succeeded" in r.json()["detail"]
    done = get(client, job_id)
    assert done["status"] == "succeeded" and done["final_metrics"] == {"eval_exact_match": 0.5}
    assert backend.stopped == []


def test_cancel_racing_the_end_in_ray_keeps_the_real_outcome(
    client: TestClient, backend: StubBackend
) -> None:
    job_id = post(client)
    reconciler(client).run_once()
    reconciler(client).run_once()
    storage = client.app.state.services.settings.storage_root  # type: ignore[attr-defined]
    original_stop = backend.stop

    def stop_too_late(stopped_id: str) -> None:
        # The job finished by itself just before our stop reached Ray (a no-op there).
        finished_run(storage, stopped_id)
        backend.statuses[stopped_id] = "SUCCEEDED"
        original_stop(stopped_id)

    backend.stop = stop_too_late  # type: ignore[method-assign]
    r = client.post(f"/v1/jobs/{job_id}/cancel", headers=H)
    assert r.status_code == 409
    assert get(client, job_id)["status"] == "succeeded"


def test_a_job_past_its_timeout_is_stopped_and_fails_with_reason_timeout(
    client: TestClient, backend: StubBackend
) -> None:
    job_id = post(client, {**GOOD, "timeout_s": 60})
    reconciler(client).run_once()
    reconciler(client).run_once()
    assert get(client, job_id)["status"] == "running"
    reconciler(client).run_once()
    assert get(client, job_id)["status"] == "running"  # within its minute
    # An hour ago, as far as the record knows.
    started = store(client).get(job_id).started_at  # type: ignore[union-attr]
    store(client).set_fields(job_id, started_at=started.replace(year=started.year - 1))
    reconciler(client).run_once()
    done = get(client, job_id)
    assert done["status"] == "failed" and done["reason"] == "timeout", done
    assert "limit of 60 s" in done["detail"] and backend.stopped == [job_id]


def test_a_loop_thread_that_ends_anyway_is_started_again(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = reconciler(client)
    run_once = loop.run_once
    calls = {"n": 0}

    def exits_once() -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise SystemExit("deep in a library")  # not an Exception: ends the thread
        run_once()

    monkeypatch.setattr(loop, "run_once", exits_once)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # expected: no noise
    job_id = post(client)
    loop.start()
    try:
        for _ in range(PATIENCE):
            if get(client, job_id)["status"] != "queued":
                break
            time.sleep(0.01)
        assert loop.restarts == 1 and get(client, job_id)["status"] != "queued"
    finally:
        loop.stop()
