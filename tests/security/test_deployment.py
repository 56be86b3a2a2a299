"""Issue 14 item 18: deployments refuse placeholder secrets, keep database credentials
off the training pods, and let only the control plane reach the Ray head's Jobs API."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from typer.testing import CliRunner

from service.cli.main import app
from tests.support.manifests import (
    CLUSTER,
    ROOT,
    SECRETISH,
    SERVICES,
    docs,
    env_map,
    kuberay,
    pod_containers,
)


def test_check_secrets_refuses_placeholders_and_weak_values() -> None:
    runner = CliRunner()
    strong = secrets.token_hex(32)
    env = {"A": strong, "B": "REPLACE_ME", "C": "aaaaaaaaaaaaaaaaaaaa"}
    result = runner.invoke(app, ["check-secrets", "A", "B", "C", "D"], env=env)
    assert result.exit_code == 2
    assert "B looks like a placeholder" in result.output
    assert "C is too predictable" in result.output and "D must be" in result.output
    assert "A " not in result.output
    assert runner.invoke(app, ["check-secrets", "A"], env=env).exit_code == 0


def test_compose_checks_every_secret_before_anything_uses_it() -> None:
    check = SERVICES["secrets-check"]
    checked = set(check["command"][2:])
    assert check["command"][:2] == ["numtune", "check-secrets"]
    used = {
        key
        for svc in SERVICES.values()
        for key, value in (svc.get("environment") or {}).items()
        if SECRETISH.search(key) and "DB_URL" not in key and "ACCESS_KEY_ID" not in key
    }
    used |= {"MINIO_ROOT_PASSWORD", "POSTGRES_PASSWORD"}
    assert used <= checked | {"AWS_SECRET_ACCESS_KEY"}, used - checked
    assert "MINIO_ROOT_PASSWORD" in checked  # AWS_SECRET_ACCESS_KEY is its value
    for name, svc in SERVICES.items():
        if name in ("secrets-check", "storage-init"):  # storage-init waits on minio
            continue
        needs = svc.get("depends_on") or {}
        assert needs.get("secrets-check") == {"condition": "service_completed_successfully"}, name


def test_only_the_control_plane_and_serving_get_database_credentials() -> None:
    assert pod_containers(CLUSTER) and "service" in SERVICES  # else the loops check nothing
    for container in pod_containers(CLUSTER):
        assert "NUMTUNE_DB_URL" not in env_map(container["env"]), container["name"]
    for name, svc in SERVICES.items():
        has_db = any("DB_URL" in k for k in (svc.get("environment") or {}))
        assert has_db == (name == "service"), name


def policy() -> dict[str, Any]:
    [found] = docs(ROOT / "cluster" / "kuberay" / "networkpolicy.yaml")
    assert found["kind"] == "NetworkPolicy"
    return found


@pytest.mark.parametrize("kind", ["RayCluster", "RayService"])
def test_the_jobs_port_admits_only_the_control_plane(kind: str) -> None:
    spec = policy()["spec"]
    selector = spec["podSelector"]["matchLabels"]
    cluster = CLUSTER if kind == "RayCluster" else kuberay(kind)["spec"]["rayClusterConfig"]
    head = cluster["headGroupSpec"]
    labels = {**head["template"]["metadata"]["labels"], "ray.io/node-type": "head"}
    assert selector.items() <= labels.items()  # the policy selects the head pods
    assert spec["policyTypes"] == ["Ingress"]
    jobs_rules = [r for r in spec["ingress"] if {"protocol": "TCP", "port": 8265} in r["ports"]]
    [rule] = jobs_rules
    peers = [p["podSelector"]["matchLabels"] for p in rule["from"]]
    assert peers[0]["app.kubernetes.io/component"] == "control-plane"
    assert peers[1] == {"app.kubernetes.io/name": "kuberay-operator"}
    opened = {(p["port"], p.get("endPort", p["port"])) for r in spec["ingress"] for p in r["ports"]}
    assert not any(lo <= 10001 <= hi for lo, hi in opened)  # the Ray client: nobody
    params = head["rayStartParams"]
    for flag in ("node-manager-port", "object-manager-port", "runtime-env-agent-port",
                 "dashboard-agent-grpc-port"):  # fmt: skip
        assert (int(params[flag]), int(params[flag])) in opened, flag
    assert (int(params["min-worker-port"]), int(params["max-worker-port"])) in opened
    for group in cluster["workerGroupSpecs"]:
        assert group["template"]["metadata"]["labels"] == head["template"]["metadata"]["labels"]
    job = docs(ROOT / "cluster" / "kuberay" / "rayjob.yaml")[0]
    submitter = job["spec"]["submitterPodTemplate"]["metadata"]["labels"]
    assert submitter["app.kubernetes.io/component"] == "control-plane"
