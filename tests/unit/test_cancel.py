"""Cancellation (service/jobs/cancel.py): a compare-and-set that loses on every attempt is an
explicit 409, never a 202 with the job unchanged; a win is recorded with who cancelled."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.jobs.cancel import CancelContendedError, cancel
from service.jobs.reconciler import Reconciler
from service.settings import Settings
from service.store import JobStore
from tests.support.stub_backend import StubBackend

ADMIN = "adm_Re4kWq8Nz1Vx6Bt3Yp9Lc2Hs7Dm5Gf0J"
H = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend()


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path, admin_token=ADMIN, reconcile_interval_s=0.001)
    with TestClient(create_app(settings, backend=backend, reconcile=False)) as c:
        yield c


def jobs_of(client: TestClient) -> JobStore:
    found: JobStore = client.app.state.services.jobs  # type: ignore[attr-defined]
    return found


def running_job(client: TestClient) -> str:
    job_id = str(client.post("/v1/jobs", json={"name": "tiny"}, headers=H).json()["id"])
    reconciler: Reconciler = client.app.state.reconciler  # type: ignore[attr-defined]
    reconciler.run_once()
    reconciler.run_once()
    return job_id


def test_a_cancel_that_loses_every_compare_and_set_is_an_explicit_conflict(
    client: TestClient, backend: StubBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = running_job(client)
    before = client.get(f"/v1/jobs/{job_id}", headers=H).json()
    assert before["status"] in ("submitted", "running")
    tries: list[Any] = []

    def always_lost(*args: Any) -> bool:
        tries.append(args)
        return False  # another writer moved the job each time

    monkeypatch.setattr(jobs_of(client), "cancel", always_lost)
    r = client.post(f"/v1/jobs/{job_id}/cancel", headers=H)
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "conflict" and "try again" in r.json()["detail"]
    assert len(tries) == 5
    assert client.get(f"/v1/jobs/{job_id}", headers=H).json()["status"] == before["status"]


def test_a_won_compare_and_set_records_who_cancelled(
    client: TestClient, backend: StubBackend
) -> None:
    job_id = running_job(client)
    store = jobs_of(client)
    row = store.get(job_id)
    assert row is not None
    done = cancel(store, backend, row, "ann", record_end=lambda _: None)
    assert (done.status, done.reason, done.detail) == ("cancelled", "cancelled", "by ann")
    assert backend.stopped == [job_id]


def test_the_number_of_attempts_is_the_callers(
    client: TestClient, backend: StubBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = running_job(client)
    store = jobs_of(client)
    row = store.get(job_id)
    assert row is not None
    monkeypatch.setattr(store, "cancel", lambda *_: False)
    with pytest.raises(CancelContendedError, match="each of 2 attempts"):
        cancel(store, backend, row, "ann", record_end=lambda _: None, attempts=2)
    assert backend.stopped == [job_id, job_id]  # each attempt asked Ray again
