"""Issue 30 item 0: an admitted job whose workers did not start before its first step goes
back to the queue (a fresh Ray submission), a bounded number of times, shown in its record
and events; it is not `failed`. Ray is stubbed at the backend boundary; the run's
result.json is the one `jobs.train.runner` writes when Ray Train's worker-group start-up times
out (tests/integration/test_start_timeout.py forces that timeout on a real Ray)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.records.models import RunResult
from jobs.records.run_files import RunFiles
from service.app import build_services
from service.backends.ray_backend import RayJobsBackend
from service.queue.admission import Resources
from service.settings import Settings
from tests.support.ray_jobs_stub import ray_jobs_api
from tests.support.reconciling import ADMIN, H, hand_reconciled, reconcile, record
from tests.support.stub_backend import StubBackend

SPEC: dict[str, Any] = {"name": "tiny", "model": {"source": "random:tiny-digit"}}
TIMED_OUT = (
    "WorkerGroupStartupTimeoutError: worker group startup timed out after 60.0 seconds "
    "waiting for 1 workers"
)


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend()


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    with hand_reconciled(tmp_path, backend, start_retries=2) as c:
        yield c


def start_times_out(client: TestClient, backend: StubBackend, ray_id: str, job_id: str) -> None:
    """The Ray job `ray_id` ends as a run whose worker group never started."""
    storage = client.app.state.services.settings.storage_root  # type: ignore[attr-defined]
    RunFiles.for_job(job_id, storage).write_result(
        RunResult.failed("insufficient_resources", TIMED_OUT)
    )
    backend.statuses[ray_id] = "FAILED"
    reconcile(client)


def test_a_start_up_timeout_before_step_one_goes_back_to_the_queue_a_bounded_number_of_times(
    client: TestClient, backend: StubBackend
) -> None:
    job_id = str(client.post("/v1/jobs", json=SPEC, headers=H).json()["id"])
    reconcile(client)
    assert backend.submitted == [job_id]
    backend.log_text = "first attempt's log\n"
    reconcile(client)
    backend.available = Resources(0.0)  # something outside the service holds the CPUs
    start_times_out(client, backend, job_id, job_id)

    back = record(client, job_id)
    assert back["status"] == "queued" and back["reason"] is None
    assert back["start_retries"] == 1
    assert (
        "back in the queue (retry 1 of 2): its workers did not start before step 1"
        in back["detail"]
    )
    assert "worker group startup timed out" in back["detail"]
    assert back["waiting_for"] == "resources: needs 1 CPU, 0 CPU free of 7 CPU"
    events = client.get(f"/v1/fine_tuning/jobs/{job_id}/events", headers=H).json()["data"]
    requeued = [e for e in events if e["id"] == f"{job_id}:requeued-1"]
    assert requeued and requeued[0]["level"] == "warn"
    first_log = client.get(f"/v1/jobs/{job_id}/logs", headers=H).text
    assert first_log.startswith("first attempt's log\n\n[numtune: back in the queue")

    # Once the CPUs are free it is submitted again under a new Ray submission id, and runs.
    backend.available = None
    backend.log_text = "second attempt's log\n"
    reconcile(client)
    assert backend.submitted == [job_id, f"{job_id}-r1"]
    assert record(client, job_id)["status"] == "submitted"
    reconcile(client)
    assert record(client, job_id)["status"] == "running"
    # The next attempt's log (a new Ray job's, from its start) follows the marker.
    log = client.get(f"/v1/jobs/{job_id}/logs", headers=H).text
    assert log == first_log + "second attempt's log\n"

    # Out of retries: the job fails, saying how often its workers did not start.
    start_times_out(client, backend, f"{job_id}-r1", job_id)
    reconcile(client)
    assert backend.submitted[-1] == f"{job_id}-r2"
    start_times_out(client, backend, f"{job_id}-r2", job_id)
    ended = record(client, job_id)
    assert ended["status"] == "failed" and ended["reason"] == "insufficient_resources"
    assert ended["start_retries"] == 2
    assert "after 3 attempts: its workers did not start before step 1" in ended["detail"]


def test_a_start_up_timeout_after_steps_ran_is_a_failure_not_a_retry(
    client: TestClient, backend: StubBackend
) -> None:
    job_id = str(client.post("/v1/jobs", json=SPEC, headers=H).json()["id"])
    reconcile(client)
    services = client.app.state.services  # type: ignore[attr-defined]
    services.jobs.add_metrics(job_id, 0, [{"step": 1, "loss": 2.0}])
    start_times_out(client, backend, job_id, job_id)
    ended = record(client, job_id)
    assert ended["status"] == "failed" and ended["reason"] == "insufficient_resources"
    assert ended["start_retries"] == 0 and backend.submitted == [job_id]


def test_the_worker_start_timeout_setting_goes_to_every_job_s_driver(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path, admin_token=ADMIN, storage=str(tmp_path / "s"), worker_start_timeout_s=90
    )
    backend = build_services(settings).backend
    assert isinstance(backend, RayJobsBackend)
    with ray_jobs_api("t") as (address, ray):  # Ray's Jobs REST API, recording requests
        backend.address, backend.token = address, "t"
        backend.submit("job-0123456789abcdef", "job", "{}", "job-0123456789abcdef-r1")
    sent = ray.jobs["job-0123456789abcdef-r1"]
    assert sent["submission_id"] == "job-0123456789abcdef-r1"
    assert sent["runtime_env"] == {"env_vars": {"RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "90"}}
    assert "--job-id job-0123456789abcdef " in sent["entrypoint"]  # storage: the job's own
