"""How the vendored schemas here were made: the OpenAPI v3 schema of one served version of
each CRD, without descriptions and status (manifests never set it), and with every Pod
template cut down to the fields numtune's manifests and backend write (the rest is kept
open: `x-kubernetes-preserve-unknown-fields`), so the files stay small.

    python cluster/kuberay/schemas/extract.py CRD.yaml VERSION OUT.json

Sources (Apache-2.0, see LICENSE-NOTICE.md): KubeRay's
ray-operator/config/crd/bases/ray.io_rayjobs.yaml and Kueue's
config/components/crd/bases/kueue.x-k8s.io_{clusterqueues,localqueues,resourceflavors,
workloadpriorityclasses}.yaml.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

CONTAINER_FIELDS = ("name", "image", "command", "args", "env", "ports", "resources")


def strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def pod_template(schema: dict[str, Any]) -> dict[str, Any]:
    """A PodTemplateSpec schema that checks its containers' main fields only."""
    spec = schema["properties"]["spec"]
    containers = spec["properties"]["containers"]
    item = containers["items"]
    item["properties"] = {k: v for k, v in item["properties"].items() if k in CONTAINER_FIELDS}
    spec["properties"] = {"containers": containers}
    spec["x-kubernetes-preserve-unknown-fields"] = True
    schema["properties"] = {
        "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "spec": spec,
    }
    return schema


def prune(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if (
                key in ("template", "submitterPodTemplate")
                and isinstance(value, dict)
                and ("spec" in value.get("properties", {}))
            ):
                out[key] = pod_template(value)
            else:
                out[key] = prune(value)
        return out
    if isinstance(node, list):
        return [prune(v) for v in node]
    return node


def main() -> None:
    crd, version, out = sys.argv[1:4]
    doc = yaml.safe_load(Path(crd).read_text())
    (served,) = [v for v in doc["spec"]["versions"] if v["name"] == version]
    schema = prune(strip(served["schema"]["openAPIV3Schema"]))
    schema["properties"].pop("status", None)
    named = {
        "group": doc["spec"]["group"],
        "version": version,
        "kind": doc["spec"]["names"]["kind"],
        "schema": schema,
    }
    Path(out).write_text(json.dumps(named, separators=(",", ":"), sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
