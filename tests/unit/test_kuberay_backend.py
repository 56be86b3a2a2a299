"""The kuberay backend at the HTTP boundary (issue 47 item 4): against a Kubernetes API server
stub (a real HTTP server on 127.0.0.1, tests/support/kube_stub.py) it creates each job as a
suspended RayJob in its owner's team LocalQueue, follows its status as KubeRay and Kueue set
it, reads the driver's log, deletes it on stop and reads the ClusterQueue's quota as the
cluster. And the control plane, configured NUMTUNE_BACKEND=kuberay, submits through it.

No real cluster: nothing here shows that Kueue admits these RayJobs or that KubeRay runs them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.backends.kuberay_backend import PRIORITY_LABEL, QUEUE_LABEL, KubeRayBackend, quantity
from service.backends.ray_backend import RayJobMissingError, RayUnreachableError
from service.queue.admission import Capacity, Resources
from service.settings import Settings
from tests.support.admission import ADMIN, H, job, post, record, token
from tests.support.kube_stub import KubeStub
from tests.support.manifests import problems

TOKEN = "kube-token-for-tests"
RAYJOBS = "/apis/ray.io/v1/namespaces/numtune/rayjobs"
QUEUE = {
    "spec": {
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "default-flavor",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "16"},
                            {"name": "nvidia.com/gpu", "nominalQuota": 2},
                        ],
                    }
                ],
            }
        ]
    },
    "status": {
        "flavorsReservation": [
            {"name": "default-flavor", "resources": [{"name": "cpu", "total": "4500m"}]}
        ]
    },
}


@pytest.fixture
def kube() -> Iterator[KubeStub]:
    with KubeStub(TOKEN) as stub:
        stub.state.cluster_queues["numtune"] = QUEUE
        yield stub


def backend_for(kube: KubeStub, storage: Path, token: str = TOKEN) -> KubeRayBackend:
    return KubeRayBackend(
        kube.url,
        "numtune",
        str(storage),
        "python",
        image="numtune/ray:0.1.0",
        cluster_queue="numtune",
        queue_of=lambda job_id: "team-a",
        token=token,
    )


def test_a_job_is_a_suspended_rayjob_followed_until_it_ends(kube: KubeStub, tmp_path: Path) -> None:
    backend = backend_for(kube, tmp_path)
    spec = json.dumps(job("x", workers=2))
    backend.submit("job-1", "job", spec, "job-1-r1")
    created = kube.state.rayjobs["job-1-r1"]
    assert created["spec"]["suspend"] is True and problems(created) == []
    assert created["metadata"]["labels"][QUEUE_LABEL] == "team-a"
    assert created["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] == 2
    assert (tmp_path / "runs" / "job-1" / "request.json").read_text() == spec
    assert all(r.authorization == f"Bearer {TOKEN}" for r in kube.state.requests)
    backend.submit("job-1", "job", spec, "job-1-r1")  # repeated after a crash: 409, followed
    assert len([r for r in kube.state.requests if r.method == "POST"]) == 2

    waiting = backend.info("job-1-r1")
    assert (waiting.status, waiting.message) == ("PENDING", "queued in Kueue (RayJob suspended)")
    created["spec"]["suspend"] = False  # Kueue admitted it; KubeRay starts its cluster
    created["status"] = {"jobDeploymentStatus": "Initializing"}
    assert backend.info("job-1-r1").message == "Ray cluster starting (Initializing)"
    created["status"] = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}
    assert backend.info("job-1-r1").status == "RUNNING"
    kube.state.pods["job-1-r1-abcde"] = ("job-1-r1", "step 1 loss 2.3\n")
    assert backend.logs("job-1-r1") == "step 1 loss 2.3\n"
    created["status"] = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
    assert backend.info("job-1-r1").status == "SUCCEEDED"
    backend.stop("job-1-r1")
    assert "job-1-r1" not in kube.state.rayjobs
    backend.stop("job-1-r1")  # already gone: a 404 is fine
    with pytest.raises(RayJobMissingError):
        backend.info("job-1-r1")
    assert backend.logs("job-2") == ""  # no submitter pod yet


def test_a_rayjob_kuberay_refused_is_failed_with_its_message(
    kube: KubeStub, tmp_path: Path
) -> None:
    backend = backend_for(kube, tmp_path)
    backend.submit("job-3", "job", json.dumps(job("x")))
    kube.state.rayjobs["job-3"]["status"] = {
        "jobDeploymentStatus": "ValidationFailed",
        "message": "RayJob name too long",
    }
    failed = backend.info("job-3")
    assert (failed.status, failed.message) == ("FAILED", "RayJob name too long")


def test_capacity_is_the_cluster_queue_quota_less_its_reservations(
    kube: KubeStub, tmp_path: Path
) -> None:
    backend = backend_for(kube, tmp_path)
    assert backend.capacity() == Capacity(Resources(16.0, 2.0), Resources(11.5, 2.0))
    assert quantity("500m") == 0.5 and quantity("16Gi") == 16 * 2**30 and quantity(3) == 3.0
    kube.state.cluster_queues.clear()
    assert backend.capacity() is None  # no queue yet: admission waits


def test_a_wrong_token_or_no_server_is_unreachable(kube: KubeStub, tmp_path: Path) -> None:
    with pytest.raises(RayUnreachableError, match="HTTP 401"):
        backend_for(kube, tmp_path, token="wrong").ping()
    backend_for(kube, tmp_path).ping()
    gone = KubeRayBackend(
        "http://127.0.0.1:9", "numtune", str(tmp_path), "python", image="i",
        cluster_queue="numtune", queue_of=lambda j: "numtune", token=TOKEN,
    )  # fmt: skip
    with pytest.raises(RayUnreachableError):
        gone.info("job-1")


def test_the_control_plane_submits_rayjobs_when_so_configured(
    kube: KubeStub, tmp_path: Path
) -> None:
    token_file = tmp_path / "kube-token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    settings = Settings(
        home=tmp_path / "home",
        admin_token=ADMIN,
        reserved_cpus=0.0,
        backend="kuberay",
        kube_api=kube.url,
        kube_token_file=token_file,
        quota_groups={"team-a": ["alice"]},
    )
    with TestClient(create_app(settings, reconcile=False)) as client:
        alice = token(client, "alice")
        urgent = {**job("b"), "priority": "high"}  # granted to no one: the admin's own
        mine, theirs = post(client, job("a"), alice), post(client, urgent, H)
        client.app.state.reconciler.run_once()  # type: ignore[attr-defined]
        client.app.state.reconciler.run_once()  # type: ignore[attr-defined]
        queues = {n: j["metadata"]["labels"][QUEUE_LABEL] for n, j in kube.state.rayjobs.items()}
        assert queues == {mine: "team-a", theirs: "numtune"}  # a team's queue, or the default
        classes = {
            n: j["metadata"]["labels"][PRIORITY_LABEL] for n, j in kube.state.rayjobs.items()
        }
        assert classes == {mine: "normal", theirs: "high"}  # the job's class, or the default
        shown = record(client, mine)
        assert shown["status"] == "submitted"
        assert shown["ray_message"] == "queued in Kueue (RayJob suspended)"
    posted = [r for r in kube.state.requests if r.method == "POST" and r.path == RAYJOBS]
    assert len(posted) == 2
