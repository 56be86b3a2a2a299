"""A real two-node Ray cluster on this machine (cluster/local.sh), driven like the service
drives one: jobs go in through Ray's Jobs API with the cluster token, and where their
Ray Train workers ran is read back from Ray's state API.

Each test's cluster is its own pair of `ray start` processes with free ports, a token
file and a short temp dir under /tmp; `local.sh down` stops exactly those processes.
This process never calls ray.init: the other integration tests own its Ray.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from ray.job_submission import JobStatus, JobSubmissionClient
from ray.util.state.api import StateApiClient
from ray.util.state.common import ActorState, ListApiOptions, NodeState, StateResource

from jobs.records.run_files import RunFiles
from tests.support.training import metric_rows, tiny_spec

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
LOCAL_SH = ROOT / "cluster" / "local.sh"
TERMINAL = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}
# What every job process needs from this test session (model caches, fast reporting).
JOB_ENV_KEYS = ("NUMTUNE_HOME", "OMP_NUM_THREADS", "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S")
ADMIN = "adm_multinode_Wv6Tq1Rz8Kx3Mp7Lc2Nb5Hj9"
ON_HEAD = {"numtune_head": 0.001}  # local.sh gives the head node this custom resource


@dataclass(frozen=True)
class LocalCluster:
    folder: Path
    env: dict[str, str]  # DIR/cluster.env as written by `local.sh up`

    @property
    def headers(self) -> dict[str, str]:
        # Explicit header, not RAY_AUTH_* in this process: Ray caches one token per
        # process, and the session's own in-process Ray may have loaded another.
        token = Path(self.env["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
        return {"Authorization": f"Bearer {token}"}

    def jobs(self) -> JobSubmissionClient:
        return JobSubmissionClient(self.env["NUMTUNE_RAY_ADDRESS"], headers=self.headers)

    def state(self) -> StateApiClient:
        return StateApiClient(self.env["NUMTUNE_RAY_ADDRESS"], headers=self.headers)

    def nodes(self) -> dict[str, dict[str, float]]:
        """Alive node id -> its resources."""
        rows = self.state().list(
            StateResource.NODES, ListApiOptions(detail=True), raise_on_missing_output=False
        )
        nodes = [n for n in rows if isinstance(n, NodeState) and n.state == "ALIVE"]
        return {n.node_id: n.resources_total for n in nodes}

    def head_node(self) -> str:
        return next(k for k, r in self.nodes().items() if "numtune_head" in r)

    def train_workers(self, client: JobSubmissionClient, submission: str) -> list[ActorState]:
        """Every RayTrainWorker actor (alive or dead) of one submitted job."""
        ray_job_id = client.get_job_info(submission).job_id
        actors = self.state().list(
            StateResource.ACTORS,
            ListApiOptions(detail=True, limit=10_000),
            raise_on_missing_output=False,
        )
        return [
            a
            for a in actors
            if isinstance(a, ActorState)
            and a.class_name == "RayTrainWorker"
            and a.job_id == ray_job_id
        ]


@contextmanager
def local_cluster(head_cpus: int, worker_cpus: int) -> Iterator[LocalCluster]:
    # Short folder: Ray's unix socket paths live under it (local.sh refuses long ones).
    folder = Path(tempfile.mkdtemp(prefix="nt", dir="/tmp"))
    env = {**os.environ, "HEAD_CPUS": str(head_cpus), "WORKER_CPUS": str(worker_cpus)}
    try:
        up = subprocess.run(
            [str(LOCAL_SH), "up", str(folder)], env=env, capture_output=True, text=True, timeout=240
        )
        assert up.returncode == 0, f"local.sh up failed:\n{up.stdout}\n{up.stderr}"
        values = dict(
            line.split("=", 1) for line in (folder / "cluster.env").read_text().splitlines()
        )
        yield LocalCluster(folder, values)
    finally:
        subprocess.run([str(LOCAL_SH), "down", str(folder)], timeout=120, check=False)
        shutil.rmtree(folder, ignore_errors=True)


def submit(
    cluster: LocalCluster, args: list[str], **options: Any
) -> tuple[JobSubmissionClient, str]:
    """Submit `python -m jobs ARGS` as a Ray job, the way the service will."""
    client = cluster.jobs()
    env = {k: os.environ[k] for k in JOB_ENV_KEYS if k in os.environ}
    submission = client.submit_job(
        entrypoint=shlex.join([sys.executable, "-m", "jobs", *args]),
        runtime_env={"env_vars": env},
        **options,
    )
    return client, submission


def wait_for(client: JobSubmissionClient, submission: str, timeout_s: float) -> JobStatus:
    """The job's terminal status; a job still going after `timeout_s` is a failure (hang)."""
    deadline = time.monotonic() + timeout_s
    while (status := client.get_job_status(submission)) not in TERMINAL:
        if time.monotonic() > deadline:
            logs = client.get_job_logs(submission)[-4000:]
            client.stop_job(submission)
            pytest.fail(f"job {submission} still {status} after {timeout_s:.0f} s:\n{logs}")
        time.sleep(1.0)
    return status


def write_spec(path: Path, data: dict[str, Any]) -> str:
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[LocalCluster]:
    # Two CPUs per node; the tests ask for 1.5 CPUs per worker, so no node holds two
    # workers and a 2-worker job (or two 1-worker trials at once) must span both nodes.
    with local_cluster(head_cpus=2, worker_cpus=2) as cluster:
        assert len(cluster.nodes()) == 2
        yield cluster


def test_two_workers_train_on_two_nodes(two_nodes: LocalCluster, tmp_path: Path) -> None:
    spec = tiny_spec(
        train={"steps": 8, "eval_every": 8, "checkpoint_every": 8},
        scaling={"num_workers": 2, "cpus_per_worker": 1.5},
    )
    storage = str(tmp_path / "storage")
    path = write_spec(tmp_path / "job.json", spec.model_dump(mode="json"))
    client, sub = submit(two_nodes, ["run", path, "--job-id", "two-nodes", "--storage", storage])

    status = wait_for(client, sub, timeout_s=420)
    result = RunFiles.for_job("two-nodes", storage).read_json("result.json")
    assert status == JobStatus.SUCCEEDED, client.get_job_logs(sub)[-4000:]
    assert result["status"] == "succeeded" and Path(result["best_checkpoint"]).is_dir()

    workers = two_nodes.train_workers(client, sub)
    assert len(workers) == 2, [(w.actor_id, w.state) for w in workers]
    assert {w.node_id for w in workers} == set(two_nodes.nodes())


def test_tune_sweep_spans_both_nodes(two_nodes: LocalCluster, tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "examples" / "tiny-tune-smmd.yaml").read_text())
    base = data["base"]
    base["train"].update(steps=4, eval_every=2, checkpoint_every=2)
    base["data"].update(train_size=64, eval_size=4)
    # Two trials at once (4 CPUs / 1.51 per trial), one worker each, one per node.
    base["scaling"].update(num_workers=1, cpus_per_worker=1.5)
    data.update(num_samples=2, asha={"grace_period": 2, "reduction_factor": 2})
    storage = str(tmp_path / "storage")
    path = write_spec(tmp_path / "tune.json", data)
    client, sub = submit(two_nodes, ["tune", path, "--tune-id", "sweep", "--storage", storage])

    status = wait_for(client, sub, timeout_s=600)
    result = RunFiles.for_job("sweep", storage).read_json("result.json")
    assert status == JobStatus.SUCCEEDED, client.get_job_logs(sub)[-4000:]
    assert result["status"] == "succeeded" and result["trials"] == 2

    trials = json.loads(Path(storage, "runs", "sweep", "trials.json").read_text())
    assert len(trials) == 2
    workers = two_nodes.train_workers(client, sub)
    assert len(workers) >= 2  # one per trial (more if a trial was restarted)
    assert {w.node_id for w in workers} == set(two_nodes.nodes())


def raylet_pid(ray_start_pid: int) -> int:
    """The raylet of the node whose `ray start --block` is `ray_start_pid` (its group)."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,pgid=,comm="], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        pid, pgid, comm = line.split(None, 2)
        if int(pgid) == ray_start_pid and comm.strip() == "raylet":
            return int(pid)
    raise AssertionError(f"no raylet in process group {ray_start_pid}")


def test_killed_worker_node_recovers_on_head(tmp_path: Path) -> None:
    """Kill the worker node's raylet mid-training: the run resumes on the head node."""
    with local_cluster(head_cpus=2, worker_cpus=2) as cluster:
        head = cluster.head_node()
        # Hold the head's CPUs so that both training workers land on the worker node.
        blocker = shlex.join([sys.executable, "-c", "import time; time.sleep(900)"])
        jobs = cluster.jobs()
        block = jobs.submit_job(
            entrypoint=blocker, entrypoint_num_cpus=2, entrypoint_resources=ON_HEAD
        )
        while jobs.get_job_status(block) != JobStatus.RUNNING:
            time.sleep(0.5)

        spec = tiny_spec(
            train={"steps": 24, "eval_every": 8, "checkpoint_every": 4}, max_failures=1
        )
        storage = str(tmp_path / "storage")
        path = write_spec(tmp_path / "job.json", spec.model_dump(mode="json"))
        client, sub = submit(
            cluster,
            ["run", path, "--job-id", "node-fault", "--storage", storage],
            entrypoint_resources=ON_HEAD,  # the driver (and Train's controller) on the head
        )
        files = RunFiles.for_job("node-fault", storage)
        deadline = time.monotonic() + 300
        while not any("checkpoint" in r for r in metric_rows(files)):
            assert client.get_job_status(sub) not in TERMINAL, client.get_job_logs(sub)
            assert time.monotonic() < deadline, "no checkpoint was reported in time"
            time.sleep(0.5)
        before = cluster.train_workers(client, sub)
        assert before and all(w.node_id != head for w in before), "workers not on worker node"

        # Free the head, then take the worker node away: its raylet, by PID.
        jobs.stop_job(block)
        wait_for(jobs, block, timeout_s=60)
        os.kill(raylet_pid(int(cluster.env["LOCAL_RAY_WORKER_PID"])), signal.SIGKILL)

        status = wait_for(client, sub, timeout_s=420)
        result = files.read_json("result.json")
        logs = client.get_job_logs(sub)[-4000:]
        assert result is not None, logs
        assert status == JobStatus.SUCCEEDED and result["status"] == "succeeded", logs
        rows = metric_rows(files)
        assert rows[-1]["step"] == 24
        assert max(r["resumed_from"] for r in rows) >= 4  # from a checkpoint, not scratch
        after = [w for w in cluster.train_workers(client, sub) if w.node_id == head]
        assert len(after) == 2  # the restarted group ran on the head


def test_killed_worker_node_fails_the_job_in_the_control_plane(tmp_path: Path) -> None:
    """The same fault seen through the service: with nowhere left to run (the head is
    held, retries are off) the job must end `failed` with a reason code, not stay running."""
    from fastapi.testclient import TestClient

    from service.app import create_app
    from service.backends.ray_backend import RayJobsBackend
    from service.settings import Settings

    admin = {"Authorization": f"Bearer {ADMIN}"}
    with local_cluster(head_cpus=2, worker_cpus=2) as cluster:
        jobs = cluster.jobs()
        blocker = shlex.join([sys.executable, "-c", "import time; time.sleep(900)"])
        block = jobs.submit_job(
            entrypoint=blocker, entrypoint_num_cpus=2, entrypoint_resources=ON_HEAD
        )
        while jobs.get_job_status(block) != JobStatus.RUNNING:
            time.sleep(0.5)
        storage = str(tmp_path / "storage")
        token = cluster.headers["Authorization"].removeprefix("Bearer ")
        backend = RayJobsBackend(cluster.env["NUMTUNE_RAY_ADDRESS"], storage, sys.executable, token)
        # No Ray Serve in this cluster: nothing to hold a CPU back for (admission would
        # otherwise keep NUMTUNE_RESERVED_CPUS=1 out of the one CPU the blocker leaves).
        settings = Settings(
            home=tmp_path,
            admin_token=ADMIN,
            storage=storage,
            reconcile_interval_s=0.5,
            reserved_cpus=0,
        )
        spec = tiny_spec(
            train={"steps": 400, "eval_every": 200, "checkpoint_every": 200}, max_failures=0
        )
        with TestClient(create_app(settings, backend=backend)) as api:
            job = api.post("/v1/jobs", json=spec.model_dump(mode="json"), headers=admin).json()
            deadline = time.monotonic() + 300
            while not api.get(f"/v1/jobs/{job['id']}/metrics", headers=admin).json()["items"]:
                assert time.monotonic() < deadline, api.get(
                    f"/v1/jobs/{job['id']}", headers=admin
                ).json()
                time.sleep(0.5)
            assert api.get(f"/v1/jobs/{job['id']}", headers=admin).json()["status"] == "running"

            os.kill(raylet_pid(int(cluster.env["LOCAL_RAY_WORKER_PID"])), signal.SIGKILL)
            deadline = time.monotonic() + 300
            while (seen := api.get(f"/v1/jobs/{job['id']}", headers=admin).json())[
                "status"
            ] not in {"succeeded", "failed", "cancelled"}:
                assert time.monotonic() < deadline, f"job left {seen['status']}: {seen}"
                time.sleep(1)
        jobs.stop_job(block)
        assert seen["status"] == "failed" and seen["reason"], seen
        assert seen["reason"] in {"worker_failed", "insufficient_resources", "lost"}, seen
        assert seen["detail"], seen
