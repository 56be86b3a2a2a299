"""The RayJob + Kueue manifests (cluster/kuberay/kueue/) and the RayJobs the kuberay backend
writes, validated against the CRDs' own OpenAPI schemas (vendored, cut down, in
cluster/kuberay/schemas/), and checked against each other: every queue a RayJob names
exists, every LocalQueue's ClusterQueue exists, the priority classes are numtune's.

No Kubernetes API server runs here: this is schema validation, not admission by a cluster
(CEL rules, `x-kubernetes-validations`, are not evaluated)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.spec import JobSpec
from service.backends.kuberay_backend import PRIORITY_LABEL, QUEUE_LABEL, KubeRayBackend
from tests.support.manifests import ROOT, SCHEMA, SCHEMAS, problems

KUEUE = ROOT / "cluster" / "kuberay" / "kueue"
PRIORITY_CLASSES = {"low", "normal", "high"}


def manifests() -> list[dict[str, Any]]:
    return [d for p in sorted(KUEUE.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in manifests() if d["kind"] == kind]


def test_the_vendored_schemas_are_small_and_cover_every_manifest_kind() -> None:
    assert sum(p.stat().st_size for p in SCHEMAS.glob("*.json")) < 64_000
    assert "Apache-2.0" in (SCHEMAS / "LICENSE-NOTICE.md").read_text()
    kinds = {(d["apiVersion"], d["kind"]) for d in manifests()}
    # Also what keeps the parametrized validation below from running over nothing.
    assert len(kinds) >= 4 and kinds == set(SCHEMA), kinds ^ set(SCHEMA)


@pytest.mark.parametrize("doc", manifests(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_manifest_validates_against_its_crd_schema(doc: dict[str, Any]) -> None:
    assert problems(doc) == []


def test_the_validator_catches_a_wrong_field() -> None:
    (job,) = of_kind("RayJob")
    broken = json.loads(json.dumps(job))
    broken["spec"]["suspend"] = "yes"
    broken["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = "two"
    found = problems(broken)
    assert any(p.startswith("spec.suspend") for p in found), found
    assert any("replicas" in p for p in found), found
    (queue,) = [q for q in of_kind("ClusterQueue")]
    assert problems({**queue, "spec": {**queue["spec"], "queueingStrategy": "Random"}})


def test_queues_and_priority_classes_fit_together() -> None:
    flavors = {f["metadata"]["name"] for f in of_kind("ResourceFlavor")}
    cluster_queues = {q["metadata"]["name"]: q for q in of_kind("ClusterQueue")}
    local = {q["metadata"]["name"]: q["spec"]["clusterQueue"] for q in of_kind("LocalQueue")}
    assert {"numtune", "team-a", "team-b"} <= set(local)  # the default queue, one per team
    assert set(local.values()) <= set(cluster_queues)
    for queue in cluster_queues.values():
        for group in queue["spec"]["resourceGroups"]:
            assert {f["name"] for f in group["flavors"]} <= flavors
    assert {c["metadata"]["name"] for c in of_kind("WorkloadPriorityClass")} == PRIORITY_CLASSES
    values = {c["metadata"]["name"]: c["value"] for c in of_kind("WorkloadPriorityClass")}
    assert values["low"] < values["normal"] < values["high"]
    for job in of_kind("RayJob"):
        assert job["spec"]["suspend"] is True  # Kueue admits it, not its creation
        assert job["metadata"]["labels"][QUEUE_LABEL] in local
        assert job["metadata"]["labels"][PRIORITY_LABEL] in PRIORITY_CLASSES


def test_the_backend_writes_the_rayjob_the_manifest_shows(tmp_path: Path) -> None:
    backend = KubeRayBackend(
        "http://127.0.0.1:9",
        "numtune",
        "/mnt/numtune",  # storage: a local path here (an s3:// one would be looked up)
        "python",
        image="numtune/ray:0.1.0",
        cluster_queue="numtune",
        queue_of=lambda job_id: "team-a",
        token="unused",
    )
    spec = JobSpec.model_validate(
        {"name": "x", "model": {"source": "random:tiny-digit"}, "scaling": {"num_workers": 2}}
    )
    job_id = "job-0123456789abcdef"
    made = backend.rayjob(job_id, "job", spec.model_dump_json(), job_id)
    assert problems(made) == []
    (shown,) = of_kind("RayJob")
    assert made["metadata"]["labels"] == shown["metadata"]["labels"]
    # The same command; the manifest's storage is an object store's.
    entrypoint = made["spec"]["entrypoint"].replace("/mnt/numtune", "s3://numtune")
    assert entrypoint == " ".join(shown["spec"]["entrypoint"].split())
    assert {**made["spec"], "entrypoint": entrypoint} == {
        **shown["spec"],
        "entrypoint": entrypoint,
    }
