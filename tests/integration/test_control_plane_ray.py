"""The control plane against the real local Ray: failures arrive with reason codes,
cancel stops the Ray job, and logs and metrics are copied while the job runs."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings

pytestmark = pytest.mark.ray
ADMIN = "adm_Zm4nB7vC1xZ8lK5jH2gF9dS6aP3oI0uY"
H = {"Authorization": f"Bearer {ADMIN}"}
TINY: dict[str, Any] = {
    "name": "tiny",
    "model": {"source": "random:tiny-digit", "use_chat_template": False},
    "data": {"task": "arithmetic", "train_size": 128, "eval_size": 8, "max_length": 96},
    "loss": {"name": "smmd"},
    "train": {"steps": 400, "batch_size": 4, "lr": 0.003, "eval_max_new_tokens": 4},
}


@pytest.fixture
def client(ray_cluster: str, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        home=tmp_path,
        admin_token=ADMIN,
        ray_address=ray_cluster,
        storage=str(tmp_path / "storage"),
        job_python=sys.executable,
        reconcile_interval_s=0.5,
    )
    with TestClient(create_app(settings)) as c:
        yield c


def wait_for(client: TestClient, job_id: str, statuses: set[str], timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}", headers=H).json()
        if job["status"] in statuses:
            return dict(job)
        time.sleep(0.5)
    raise AssertionError(f"{job_id} never reached {statuses}: {job}")


def test_a_job_whose_data_vanished_fails_with_invalid_data(
    client: TestClient, tmp_path: Path
) -> None:
    rows = tmp_path / "data" / "rows.jsonl"  # the default data root: <home>/data
    rows.parent.mkdir()
    rows.write_text(
        "\n".join(json.dumps({"prompt": f"{i}+1", "answer": str(i + 1)}) for i in range(40))
    )
    spec = {**TINY, "data": {"task": "jsonl", "path": str(rows), "eval_size": 4}}
    job = client.post("/v1/jobs", json=spec, headers=H).json()
    rows.unlink()  # accepted while it existed; gone by the time the job reads it
    done = wait_for(client, job["id"], {"succeeded", "failed", "cancelled"})
    assert done["status"] == "failed" and done["reason"] == "invalid_data", done
    assert "no such file" in (done["detail"] or "")
    logs = client.get(f"/v1/jobs/{job['id']}/logs", headers=H).text
    assert "DataError" in logs
    run = Path(client.app.state.services.settings.storage_root) / "runs" / job["id"]  # type: ignore[attr-defined]
    assert "DataError" in (run / "driver.log").read_text()


def test_cancel_stops_a_running_ray_job(client: TestClient) -> None:
    job = client.post("/v1/jobs", json=TINY, headers=H).json()
    deadline = time.monotonic() + 240
    while not client.get(f"/v1/jobs/{job['id']}/metrics", headers=H).json()["items"]:
        if time.monotonic() > deadline:
            seen = client.get(f"/v1/jobs/{job['id']}", headers=H).json()
            logs = client.get(f"/v1/jobs/{job['id']}/logs", headers=H).text
            raise AssertionError(f"no metrics copied while the job ran: {seen}\n{logs[-3000:]}")
        time.sleep(0.5)
    assert client.get(f"/v1/jobs/{job['id']}", headers=H).json()["status"] == "running"
    r = client.post(f"/v1/jobs/{job['id']}/cancel", headers=H)
    assert r.status_code == 202 and r.json()["status"] == "cancelled"
    backend = client.app.state.services.backend  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while backend.info(job["id"]).status != "STOPPED":
        assert time.monotonic() < deadline, "Ray never stopped the job"
        time.sleep(0.5)
    again = client.post(f"/v1/jobs/{job['id']}/cancel", headers=H)
    assert again.status_code == 409


def test_a_registry_model_source_trains_on_ray(client: TestClient) -> None:
    """Issue 14 item 2 end to end: the service pins `registry:` to a version's files and
    hashes, and the Ray job trains from exactly those (a changed byte is refused:
    tests/security/test_confinement.py)."""
    # The base version comes from a job trained on this Ray (a row made finished by hand
    # while the queue's loops run is taken by them first). The end-of-job registration may
    # register its checkpoint (as the job's name) before this call does: registering under
    # that same name then returns that version; any other name would be a 409 (issue 45).
    services = client.app.state.services  # type: ignore[attr-defined]
    short = {**TINY["train"], "steps": 3}
    first = client.post("/v1/jobs", json={**TINY, "name": "for-base", "train": short}, headers=H)
    trained = wait_for(client, first.json()["id"], {"succeeded", "failed", "cancelled"})
    assert trained["status"] == "succeeded", trained
    row = services.registry.register(
        name="for-base", owner="admin", job=services.jobs.get(trained["id"])
    )
    source = f"registry:{row.name}:{row.version}"
    spec = {**TINY, "name": "from-registry", "model": {"source": source}, "train": short}
    posted = client.post("/v1/jobs", json=spec, headers=H)
    assert posted.status_code == 202, posted.text
    job = posted.json()
    assert job["spec"]["model"]["pinned"]["files"] == row.files
    done = wait_for(client, job["id"], {"succeeded", "failed", "cancelled"})
    assert done["status"] == "succeeded", done
