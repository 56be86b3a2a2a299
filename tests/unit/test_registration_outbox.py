"""Issue 30 item 1 / issue 31 item 5: registration is a durable step of the job's life.

The reconciler writes the pending registration with the succeeded state; the registrar
registers it off the reconciler's thread and retries a failure with backoff. Here storage
fails twice, then works: one version, the job record and its events say so, nothing is
duplicated. Ray is stubbed at the backend boundary; the checkpoint and storage are real."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.modeling.model import load_model_and_tokenizer
from jobs.records.models import RunResult
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec
from jobs.train.checkpoint import save_checkpoint
from service.app import create_app
from service.registry.files import RegistryFiles
from service.registry.registrar import Registrar
from service.settings import Settings
from tests.support.stub_backend import StubBackend

ADMIN = "adm_Pq3wX8zL1vN6mB4kR9tY2cH7jF5dS0aG"
H = {"Authorization": f"Bearer {ADMIN}"}
SPEC: dict[str, Any] = {"name": "arith", "model": {"source": "random:tiny-digit"}}


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend()


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    settings = Settings(
        home=tmp_path,
        admin_token=ADMIN,
        storage=str(tmp_path / "storage"),
        registration_retry_s=0.001,
        registration_attempts=5,
    )
    with TestClient(create_app(settings, backend=backend, reconcile=False)) as c:
        yield c


def succeed_in_ray(client: TestClient, backend: StubBackend) -> str:
    """A job that ran in (stubbed) Ray and left a real checkpoint and result.json."""
    job_id = str(client.post("/v1/jobs", json=SPEC, headers=H).json()["id"])
    reconciler = client.app.state.reconciler  # type: ignore[attr-defined]
    reconciler.run_once()
    assert backend.submitted == [job_id]
    storage = client.app.state.services.settings.storage_root  # type: ignore[attr-defined]
    files = RunFiles.for_job(job_id, storage)
    checkpoint = Path(files.root) / "train" / "checkpoint_000001"
    spec = JobSpec.model_validate(SPEC)
    model, tokenizer = load_model_and_tokenizer(spec.model, seed=0)
    save_checkpoint(checkpoint, model=model, tokenizer=tokenizer, spec=spec, metrics={"step": 5})
    files.write_result(RunResult(status="succeeded", best_checkpoint=str(checkpoint)))
    backend.statuses[job_id] = "SUCCEEDED"
    reconciler.run_once()
    return job_id


def test_registration_retries_a_storage_failure_and_ends_with_one_version(
    client: TestClient, backend: StubBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = succeed_in_ray(client, backend)
    done = client.get(f"/v1/jobs/{job_id}", headers=H).json()
    # Written with the succeeded state, before any attempt: a crash here loses nothing.
    assert done["status"] == "succeeded"
    assert done["registration"]["status"] == "pending"
    assert done["registration"]["attempts"] == 0

    real_copy, calls = RegistryFiles.copy, []

    def flaky_copy(self: RegistryFiles, src: str, dest: str) -> dict[str, str]:
        calls.append(dest)
        if len(calls) <= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_copy(self, src, dest)

    monkeypatch.setattr(RegistryFiles, "copy", flaky_copy)
    registrar: Registrar = client.app.state.registrar  # type: ignore[attr-defined]
    registrar.run_once()
    first = client.get(f"/v1/jobs/{job_id}", headers=H).json()["registration"]
    assert first["status"] == "pending" and first["attempts"] == 1
    assert "No space left on device" in first["error"] and first["next_attempt_at"]
    events = client.get(f"/v1/fine_tuning/jobs/{job_id}/events", headers=H).json()["data"]
    assert "Registration attempt 1 failed" in events[0]["message"]

    for _ in range(200):  # the backoff is milliseconds here
        registrar.run_once()
        if len(calls) >= 3:
            break
    assert len(calls) == 3
    for _ in range(3):
        registrar.run_once()  # nothing pending: no further attempt
    assert len(calls) == 3

    record = client.get(f"/v1/jobs/{job_id}", headers=H).json()["registration"]
    assert record == {
        "status": "done",
        "attempts": 3,
        "model": "arith:1",
        "error": "OSError: [Errno 28] No space left on device",  # the last failure, kept
        "next_attempt_at": None,
    }
    versions = client.get("/v1/models/arith", headers=H).json()["versions"]
    assert [v["version"] for v in versions] == [1]
    assert versions[0]["job_id"] == job_id
    registry = Path(client.app.state.services.settings.storage_root) / "registry"  # type: ignore[attr-defined]
    assert sorted(p.name for p in (registry / "arith").iterdir()) == ["v1"]
    assert list((registry / ".staging").iterdir()) == []  # the failed copies left nothing
    ft = client.get(f"/v1/fine_tuning/jobs/{job_id}", headers=H).json()
    assert ft["fine_tuned_model"] == "arith:1"
    events = client.get(f"/v1/fine_tuning/jobs/{job_id}/events", headers=H).json()["data"]
    assert events[0]["message"] == "Registered as arith:1"


def test_a_registration_a_person_must_fix_fails_for_good_and_says_why(
    client: TestClient, backend: StubBackend
) -> None:
    # Bob has a model named "arith": the admin's job cannot take the name, and no retry
    # changes that.
    services = client.app.state.services  # type: ignore[attr-defined]
    services.registry.store.reserve_version("arith", "bob")
    job_id = succeed_in_ray(client, backend)
    registrar: Registrar = client.app.state.registrar  # type: ignore[attr-defined]
    registrar.run_once()
    record = client.get(f"/v1/jobs/{job_id}", headers=H).json()["registration"]
    assert record["status"] == "failed" and record["attempts"] == 1
    assert "ModelOwnedElsewhereError" in record["error"]
    registrar.run_once()
    assert client.get(f"/v1/jobs/{job_id}", headers=H).json()["registration"]["attempts"] == 1
