"""Issue 13's fault test against a real Ray head of its own: the head stops while one job
runs, one waits in the queue behind it and one is being cancelled. The reconciler keeps
passing, `/readyz` says Ray is down, the queued job says what it waits for, and every job
ends: the running one `failed`/`ray_unreachable` once Ray stayed away past the limit, the
cancelled one cancelled, the queued one cancelled by its owner (it never reached Ray).

The unit suite (`tests/unit/test_reliability.py`) covers Ray coming back, which needs the
same address again; here the head is gone for good."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.backends.ray_backend import RayJobsBackend
from service.cli.ray_head import start_ray_head, stop_ray_head
from service.cli.state import State
from service.settings import Settings

pytestmark = [pytest.mark.ray, pytest.mark.slow]
ADMIN = "adm_Fm6tYq1Wz8Kr3Xp5Nb9Lv2Hc7Dg4Sj0U"
H = {"Authorization": f"Bearer {ADMIN}"}
TINY: dict[str, Any] = {
    "model": {"source": "random:tiny-digit", "use_chat_template": False},
    "data": {"task": "arithmetic", "train_size": 128, "eval_size": 8, "max_length": 96},
    "train": {"steps": 2000, "batch_size": 4, "lr": 0.003, "eval_max_new_tokens": 4},
    "scaling": {"num_workers": 1, "cpus_per_worker": 1},
}


@pytest.fixture
def head(tmp_path: Path) -> Iterator[State]:
    state = State(str(tmp_path), "", 0, "127.0.0.1", True, 0, "")
    try:
        start_ray_head(state, num_cpus=1)  # room for one job at a time
        yield state
    finally:
        stop_ray_head(state)  # by PID; a no-op once the test has stopped it


def wait(client: TestClient, job_id: str, until: Any, timeout_s: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}", headers=H).json()
        if until(job):
            return job
        assert time.monotonic() < deadline, f"{job_id} never got there: {job}"
        time.sleep(0.5)


def test_ray_stopping_under_queued_running_and_cancelling_jobs(head: State, tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path / "service",
        admin_token=ADMIN,
        storage=str(tmp_path / "storage"),
        reconcile_interval_s=0.5,
        unreachable_timeout_s=20,
        reserved_cpus=0.0,  # no serving on this head: its one CPU is the jobs'
    )
    token = Path(str(head.ray_token_path)).read_text().strip()
    backend = RayJobsBackend(head.ray_address, settings.storage_root, sys.executable, token)
    with TestClient(create_app(settings, backend=backend)) as client:
        running = client.post("/v1/jobs", json={**TINY, "name": "running"}, headers=H).json()
        wait(client, running["id"], lambda job: job["status"] == "running")
        queued = client.post("/v1/jobs", json={**TINY, "name": "queued"}, headers=H).json()
        wait(client, queued["id"], lambda job: "resources" in (job["waiting_for"] or ""))

        stop_ray_head(head)
        loop = client.app.state.reconciler  # type: ignore[attr-defined]
        cancel = client.post(f"/v1/jobs/{running['id']}/cancel", headers=H)
        assert cancel.status_code == 503 and cancel.json()["error"] == "ray_unreachable"
        before = loop.passes
        waiting = wait(client, queued["id"], lambda job: "unreachable" in job["waiting_for"])
        assert waiting["status"] == "queued"
        ready = client.get("/readyz", headers=H)
        assert ready.status_code == 503 and ready.json()["checks"]["ray"].startswith("error")
        assert ready.json()["checks"]["reconciler"] == "ok"

        failed = wait(client, running["id"], lambda job: job["status"] != "running")
        assert failed["status"] == "failed" and failed["reason"] == "ray_unreachable", failed
        assert loop.passes > before  # the loop kept going all along
        gone = client.post(f"/v1/jobs/{queued['id']}/cancel", headers=H)
        assert gone.status_code == 202 and gone.json()["status"] == "cancelled"
        for job_id in (running["id"], queued["id"]):
            status = client.get(f"/v1/jobs/{job_id}", headers=H).json()["status"]
            assert status in ("failed", "cancelled")
