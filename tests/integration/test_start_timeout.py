"""Issue 30 item 0 on a real Ray: a job the service admitted, whose workers then cannot
start because something outside the admission's count took the CPUs, goes back to the
queue when Ray Train's worker-group start-up times out, and runs once the CPUs are free.

The timeout is forced: every job gets RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S = 2 s (what
`worker_start_timeout_s` sets), and another Ray job reserving every CPU of the head
(`entrypoint_num_cpus`) is submitted right after admission and stopped once the job is
back in the queue. The head is one of its own (`numtune up`'s launcher), with every port
free: a second head on the machine must not share its agent's port."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from ray.job_submission import JobSubmissionClient

from service.app import create_app
from service.backends.ray_backend import RayJobsBackend
from service.cli.ray_head import start_ray_head, stop_ray_head
from service.cli.state import State
from service.settings import Settings

pytestmark = [pytest.mark.ray, pytest.mark.slow]
CPUS = 2
ADMIN = "adm_Tb6nM1kW9qZ4xC7vR2pL8sD3fG5hJ0yE"
H = {"Authorization": f"Bearer {ADMIN}"}
TINY: dict[str, Any] = {
    "name": "late-start",
    "model": {"source": "random:tiny-digit", "use_chat_template": False},
    "data": {"task": "arithmetic", "train_size": 32, "eval_size": 4, "max_length": 96},
    "train": {"steps": 2, "batch_size": 4, "eval_max_new_tokens": 4},
    "calibration": {"questions": 0},
}


def wait_until(
    client: TestClient, job_id: str, done: Callable[[dict[str, Any]], bool], timeout: float
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}", headers=H).json()
        if done(job):
            return job
        time.sleep(0.25)
    raise AssertionError(f"{job_id} never got there: {job}")


@pytest.fixture
def head(tmp_path: Path) -> Iterator[State]:
    state = State(str(tmp_path), "", 0, "127.0.0.1", True, 0, "")
    try:
        start_ray_head(state, num_cpus=CPUS)
        yield state
    finally:
        stop_ray_head(state)


def test_an_admitted_job_whose_workers_cannot_start_is_queued_again_then_runs(
    head: State, tmp_path: Path
) -> None:
    settings = Settings(
        home=tmp_path / "service",
        admin_token=ADMIN,
        storage=str(tmp_path / "storage"),
        reconcile_interval_s=0.25,
        reserved_cpus=0.0,  # no serving on this head
    )
    token = Path(str(head.ray_token_path)).read_text().strip()
    # What create_app gives every job for NUMTUNE_WORKER_START_TIMEOUT_S=2 (unit-tested).
    start_timeout = {"RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "2"}
    backend = RayJobsBackend(
        head.ray_address, settings.storage_root, sys.executable, token, env=start_timeout
    )
    ray_jobs = JobSubmissionClient(head.ray_address, headers={"Authorization": f"Bearer {token}"})
    with TestClient(create_app(settings, backend=backend)) as client:
        job_id = client.post("/v1/jobs", json=TINY, headers=H).json()["id"]
        wait_until(client, job_id, lambda j: j["status"] != "queued", 240)
        # Admitted. Now the CPUs go elsewhere before its driver asks for its workers.
        holder = ray_jobs.submit_job(entrypoint="sleep 900", entrypoint_num_cpus=CPUS)
        try:
            back = wait_until(client, job_id, lambda j: j["start_retries"] >= 1, 300)
            assert back["status"] == "queued", back
            assert "did not start before step 1" in back["detail"]
        finally:
            ray_jobs.stop_job(holder)
        done = wait_until(client, job_id, lambda j: j["status"] in ("succeeded", "failed"), 300)
    assert done["status"] == "succeeded", done
    assert done["start_retries"] == 1 and done["metrics_count"] > 0
