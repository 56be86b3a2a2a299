"""Pause and resume through the REST API (issue 47 item 1), Ray stubbed at the backend
boundary: the run's side is the result.json `jobs.train.runner` writes when the loop stopped
on a pause request (tests/integration/test_pause_train.py runs the loop itself, and the e2e
test the whole path on `numtune up`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.records.models import PAUSE_REQUEST, RunResult
from jobs.records.run_files import RunFiles
from service.app import create_app
from service.settings import Settings
from tests.support.stub_backend import StubBackend

ADMIN = "adm_Pq7sW2eR9tY4uI1oP6aS3dF8gH5jK0lZ"
H = {"Authorization": f"Bearer {ADMIN}"}
SPEC: dict[str, Any] = {"name": "tiny", "model": {"source": "random:tiny-digit"}}


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend()


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path, admin_token=ADMIN, storage=str(tmp_path / "storage"))
    with TestClient(create_app(settings, backend=backend, reconcile=False)) as c:
        yield c


def reconcile(client: TestClient) -> None:
    client.app.state.reconciler.run_once()  # type: ignore[attr-defined]


def run_files(client: TestClient, job_id: str) -> RunFiles:
    storage = client.app.state.services.settings.storage_root  # type: ignore[attr-defined]
    return RunFiles.for_job(job_id, storage)


def post(client: TestClient, path: str, headers: dict[str, str] = H) -> Any:
    return client.post(path, headers=headers)


def test_a_running_job_pauses_at_a_checkpoint_and_resumes_as_a_new_submission(
    client: TestClient, backend: StubBackend
) -> None:
    job_id = str(client.post("/v1/jobs", json=SPEC, headers=H).json()["id"])
    reconcile(client)
    reconcile(client)
    assert client.get(f"/v1/jobs/{job_id}", headers=H).json()["status"] == "running"

    asked = post(client, f"/v1/jobs/{job_id}/pause")
    assert asked.status_code == 200, asked.text
    assert asked.json()["status"] == "running" and asked.json()["pause_requested_at"]
    again = post(client, f"/v1/jobs/{job_id}/pause")  # idempotent: the same record
    assert again.status_code == 200 and again.json() == asked.json()
    assert post(client, f"/v1/jobs/{job_id}/resume").status_code == 409  # still pausing
    openai = client.get(f"/v1/fine_tuning/jobs/{job_id}", headers=H).json()
    assert openai["status"] == "pausing"

    files = run_files(client, job_id)
    reconcile(client)
    assert files.has(PAUSE_REQUEST)  # handed to the run, which stops at its next step
    checkpoint = f"{files.uri}/train/checkpoint_step_0000003"
    files.write_result(RunResult(status="paused", best_checkpoint=checkpoint, metrics={"step": 3}))
    backend.statuses[job_id] = "SUCCEEDED"  # the Ray job ended: its resources are free
    reconcile(client)

    paused = client.get(f"/v1/jobs/{job_id}", headers=H).json()
    assert paused["status"] == "paused" and paused["paused_checkpoint"] == checkpoint
    assert paused["pause_requested_at"] is None and paused["finished_at"] is None
    assert not files.has(PAUSE_REQUEST) and not files.has("result.json")
    assert files.has("result-pause-1.json")
    assert post(client, f"/v1/jobs/{job_id}/pause").json() == paused  # paused: same record
    assert client.get(f"/v1/fine_tuning/jobs/{job_id}", headers=H).json()["status"] == "paused"
    reconcile(client)
    assert backend.submitted == [job_id]  # a paused job is not admitted again by itself

    resumed = post(client, f"/v1/jobs/{job_id}/resume")
    assert resumed.status_code == 200 and resumed.json()["status"] == "queued"
    assert resumed.json()["resumes"] == 1
    files.write_text(PAUSE_REQUEST, "{}")  # a stale request must not stop the resumed run
    reconcile(client)
    assert backend.submitted == [job_id, f"{job_id}-p1"]  # a fresh Ray submission
    assert not files.has(PAUSE_REQUEST)

    events = client.get(f"/v1/jobs/{job_id}/events", headers=H).json()["items"]
    assert [(e["kind"], e["by"]) for e in events] == [
        ("pause_requested", "admin"),
        ("paused", "numtune"),
        ("resumed", "admin"),
    ]
    assert "step 3" in events[1]["detail"] and checkpoint in events[2]["detail"]
    ft = client.get(f"/v1/fine_tuning/jobs/{job_id}/events", headers=H).json()["data"]
    assert any(e["message"].startswith("Resumed by admin") for e in ft)


def test_a_paused_queued_job_is_held_until_resumed(
    client: TestClient, backend: StubBackend
) -> None:
    job_id = str(client.post("/v1/jobs", json=SPEC, headers=H).json()["id"])
    held = client.post(f"/v1/fine_tuning/jobs/{job_id}/pause", headers=H)
    assert held.status_code == 200 and held.json()["status"] == "paused"
    reconcile(client)
    assert backend.submitted == []
    assert client.post(f"/v1/fine_tuning/jobs/{job_id}/resume", headers=H).json()["status"] == (
        "queued"
    )
    reconcile(client)
    assert len(backend.submitted) == 1


def test_only_the_owner_pauses_and_an_ended_job_is_a_conflict(client: TestClient) -> None:
    job_id = str(client.post("/v1/jobs", json=SPEC, headers=H).json()["id"])
    r = client.post("/v1/tokens", json={"owner": "bob", "scopes": ["read", "submit"]}, headers=H)
    bob = {"Authorization": f"Bearer {r.json()['token']}"}
    for verb in ("pause", "resume"):
        assert post(client, f"/v1/jobs/{job_id}/{verb}", bob).status_code == 404
        assert post(client, f"/v1/fine_tuning/jobs/{job_id}/{verb}", bob).status_code == 404
    assert client.get(f"/v1/jobs/{job_id}/events", headers=bob).status_code == 404
    paused = post(client, f"/v1/jobs/{job_id}/pause")
    assert paused.json()["status"] == "paused"
    assert client.post(f"/v1/jobs/{job_id}/cancel", headers=H).status_code == 202
    for verb in ("pause", "resume"):
        ended = post(client, f"/v1/jobs/{job_id}/{verb}")
        assert ended.status_code == 409 and "cancelled" in ended.json()["detail"]
