"""Two API processes on one PostgreSQL database and one local Ray head: only the lease
holder reconciles; SIGKILL it mid-job and the other takes the lease over within seconds
and follows the job to `succeeded`, with one Ray submission and the log copied exactly
(no line lost, none twice)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.backends.ray_backend import RayJobsBackend
from service.cli.processes import free_ports, wait_gone
from service.cli.ray_head import start_ray_head, stop_ray_head
from service.cli.state import State
from tests.e2e.conftest import processes_of, tiny_job, wait_for_job
from tests.support.postgres import postgres_server

pytestmark = [pytest.mark.ray, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 300  # generous: the 2 cores are often shared with other work
TAKEOVER_S = 10.0  # the standby retries every reconcile interval (1 s)


@dataclass
class Api:
    url: str
    log: Path
    process: subprocess.Popen[bytes]

    def lease(self, http: httpx.Client) -> dict[str, Any]:
        lease: dict[str, Any] = http.get(f"{self.url}/readyz").json()["reconciler_lease"]
        return lease


@dataclass
class Cluster:
    home: Path
    state: State
    env: dict[str, str]
    apis: list[Api]

    def start_api(self, name: str) -> Api:
        (port,) = free_ports(1)
        log = self.home / "logs" / f"{name}.log"
        cmd = [sys.executable, "-m", "service.cli", "api", "--dev", "--port", str(port)]
        with log.open("wb") as out:
            process = subprocess.Popen(cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        api = Api(f"http://127.0.0.1:{port}", log, process)
        self.apis.append(api)
        deadline = time.monotonic() + 120
        while not ready(api.url, self.home):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        return api

    def http(self, api: Api) -> httpx.Client:
        token = (self.home / "admin-token").read_text().strip()
        auth = {"Authorization": f"Bearer {token}"}
        return httpx.Client(base_url=api.url, headers=auth, timeout=30)


def ready(url: str, home: Path) -> bool:
    token_file = home / "admin-token"
    if not token_file.exists():
        return False
    auth = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
    try:
        return httpx.get(f"{url}/readyz", headers=auth, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    state = State(str(home), "", 0, "127.0.0.1", True, 0, "")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMTUNE_", "RAY_ADDRESS"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # this test's own Jobs client too
    apis: list[Api] = []
    with postgres_server() as db_url:
        try:
            start_ray_head(state, num_cpus=2)
            env.update(NUMTUNE_HOME=str(home), NUMTUNE_DB_URL=db_url)
            env.update(NUMTUNE_RAY_ADDRESS=state.ray_address, RAY_AUTH_MODE="token")
            env["RAY_AUTH_TOKEN_PATH"] = str(state.ray_token_path)
            yield Cluster(home, state, env, apis)
        finally:
            for api in apis:
                api.process.kill()
                api.process.wait()
            stop_ray_head(state)
            for pid in processes_of(home, state.ray_temp_dir):  # only if the head's stop failed
                os.kill(pid, signal.SIGKILL)


def test_standby_takes_the_lease_and_finishes_the_job(cluster: Cluster) -> None:
    first = cluster.start_api("api-1")  # started first, so it takes the lease
    second = cluster.start_api("api-2")
    steps = 30
    with cluster.http(second) as http:
        assert first.lease(http)["held"] and not second.lease(http)["held"]
        holder = first.lease(http)["pid"]
        assert holder == first.process.pid
        created = http.post("/v1/jobs", json=tiny_job("e2e-lease", steps))
        assert created.status_code == 202, created.text
        job_id = created.json()["id"]
        job_url = f"/v1/jobs/{job_id}"
        wait_for_job(http, job_id, JOB_TIMEOUT_S, until=lambda j: j["metrics_count"] >= 2)
        os.kill(holder, signal.SIGKILL)
        killed = time.monotonic()
        assert wait_gone(holder, 10)
        assert http.get(job_url).json()["status"] == "running"  # killed mid-job
        while not second.lease(http)["held"]:
            assert time.monotonic() - killed < TAKEOVER_S, "the standby never took the lease"
            time.sleep(0.2)
        print(f"lease taken over {time.monotonic() - killed:.1f} s after SIGKILL")
        job = wait_for_job(http, job_id, JOB_TIMEOUT_S)
        assert job["status"] == "succeeded", job
        rows = http.get(f"{job_url}/metrics").json()["items"]
        assert [r["step"] for r in rows] == list(range(1, steps + 1))
        copied = http.get(f"{job_url}/logs").text
    token = Path(str(cluster.state.ray_token_path)).read_text().strip()
    ray = RayJobsBackend(cluster.state.ray_address, "", sys.executable, token)
    # One Ray job for our id, and its whole log in our database: nothing lost, nothing twice.
    # (Ray's Jobs REST API lists every job the head knows.)
    listed = httpx.get(
        f"{cluster.state.ray_address}/api/jobs/",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    ).json()
    ours = [j for j in listed if j["submission_id"] == job_id]
    assert len(ours) == 1
    assert copied == ray.logs(job_id)
    assert f"job {job_id}: succeeded" in copied
    first_log, second_log = first.log.read_text(), second.log.read_text()
    # The reconciler's lease (the registrar and the study loop hold leases of their own).
    took = re.compile(r"reconciler \(pid \d+\) took the lease")
    assert len(took.findall(first_log)) == 1 and len(took.findall(second_log)) == 1
    # The successor followed the submitted job; it never tried to submit it again.
    assert "already submitted" not in first_log + second_log
