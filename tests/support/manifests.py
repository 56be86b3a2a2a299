"""The deployment files (cluster/, docker/) as the manifest tests read them: YAML documents,
the KubeRay RayCluster's spec and the compose services, each container and its environment;
and the vendored CRD schemas (cluster/kuberay/schemas/) a manifest is validated against."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "cluster" / "kuberay" / "schemas"
SECRETISH = re.compile(r"TOKEN|PASSWORD|SECRET|ACCESS_KEY|DB_URL")


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def kuberay(kind: str) -> dict[str, Any]:
    found = [d for p in ROOT.glob("cluster/kuberay/*.yaml") for d in docs(p) if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind} in cluster/kuberay, found {len(found)}"
    return found[0]


COMPOSE = docs(ROOT / "docker" / "compose.yaml")[0]
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
CLUSTER = kuberay("RayCluster")["spec"]


def pod_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every container of a RayCluster spec (head and all worker groups)."""
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    return [c for g in groups for c in g["template"]["spec"]["containers"]]


def env_map(env: list[dict[str, Any]]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in env}


def schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> its schema."""
    found = {}
    for path in SCHEMAS.glob("*.json"):
        named = json.loads(path.read_text())
        found[(f"{named['group']}/{named['version']}", named["kind"])] = named["schema"]
    return found


SCHEMA = schemas()


def problems(doc: dict[str, Any]) -> list[str]:
    """What the schema of the document's kind finds wrong with it (none: it validates)."""
    schema = SCHEMA[(doc["apiVersion"], doc["kind"])]
    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)
    ]
