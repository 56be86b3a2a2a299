"""Issue 30 item 0 on a real Ray: a job the service admitted, whose workers then cannot
start because something outside the admission's count took the CPUs, goes back to the
queue when Ray Train's worker-group start-up times out, and runs once the CPUs are free.

The timeout is forced: the service gives every job RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S
= 2 s (`worker_start_timeout_s`), and a placement group taken right after admission holds
every CPU of the cluster until the job is back in the queue."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ray
from fastapi.testclient import TestClient
from ray.util.placement_group import placement_group, remove_placement_group

from service.app import create_app
from service.settings import Settings

pytestmark = pytest.mark.ray
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


def test_an_admitted_job_whose_workers_cannot_start_is_queued_again_then_runs(
    ray_cluster: str, tmp_path: Path
) -> None:
    settings = Settings(
        home=tmp_path,
        admin_token=ADMIN,
        ray_address=ray_cluster,
        storage=str(tmp_path / "storage"),
        job_python=sys.executable,
        reconcile_interval_s=0.25,
        reserved_cpus=0.0,  # no serving on this test cluster
        worker_start_timeout_s=2.0,
    )
    with TestClient(create_app(settings)) as client:
        job_id = client.post("/v1/jobs", json=TINY, headers=H).json()["id"]
        wait_until(client, job_id, lambda j: j["status"] != "queued", 240)
        # Admitted. Now the CPUs go elsewhere before its driver asks for its workers.
        cpus = ray.cluster_resources()["CPU"]
        hold = placement_group([{"CPU": cpus}])
        ray.get(hold.ready(), timeout=30)
        try:
            back = wait_until(client, job_id, lambda j: j["start_retries"] >= 1, 240)
            assert back["status"] == "queued", back
            assert "did not start before step 1" in back["detail"]
        finally:
            remove_placement_group(hold)
        done = wait_until(client, job_id, lambda j: j["status"] in ("succeeded", "failed"), 300)
    assert done["status"] == "succeeded", done
    assert done["start_retries"] == 1 and done["metrics_count"] > 0
