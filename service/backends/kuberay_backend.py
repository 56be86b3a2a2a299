"""The Kubernetes backend (NUMTUNE_BACKEND=kuberay): each job is a KubeRay RayJob, created
suspended and labelled with its team's Kueue LocalQueue, so Kueue decides when its Ray
cluster starts (quota, priority, fair sharing across cohorts), then KubeRay runs the same
entrypoint the Ray backend hands Ray's Jobs API, on a Ray cluster of the job's own.

It speaks the Kubernetes REST API with httpx (no client library): create, read and delete
RayJobs, read the submitter pod's log, and read the ClusterQueue's quota and reservations
as the capacity admission plans against. Tested only against an API server stub at the
HTTP boundary (tests/unit/test_kuberay_backend.py); never against a real cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from jobs.records.models import REQUEST
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec, TuneSpec
from service.backends.ray_backend import (
    RayJobInfo,
    RayJobMissingError,
    RayJobsBackend,
    RayUnreachableError,
)
from service.queue.admission import Capacity, Resources

log = logging.getLogger(__name__)

RAYJOBS = "/apis/ray.io/v1/namespaces/{ns}/rayjobs"
CLUSTER_QUEUE = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{name}"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
GPU = "nvidia.com/gpu"
_SUFFIXES = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def quantity(text: str | int | float) -> float:
    """A Kubernetes quantity ("500m", "4", "16Gi") as a number."""
    value = str(text)
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * _SUFFIXES[suffix]
    return float(value)


# Every Ray process of a job's cluster uses token auth, the token from the `numtune` Secret
# (cluster/kuberay/secret.example.yaml), as the RayCluster of raycluster.yaml does.
AUTH_ENV = [
    {"name": "RAY_AUTH_MODE", "value": "token"},
    {
        "name": "RAY_AUTH_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "numtune", "key": "ray-auth-token"}},
    },
]


def _container(name: str, image: str, cpus: float, gpus: float, memory_mb: int) -> dict[str, Any]:
    amounts: dict[str, str] = {"cpu": f"{cpus:g}", "memory": f"{memory_mb}Mi"}
    if gpus:
        amounts[GPU] = f"{gpus:g}"
    resources = {"requests": amounts, "limits": amounts}
    return {"name": name, "image": image, "env": AUTH_ENV, "resources": resources}


def workers_of(spec: JobSpec | TuneSpec) -> tuple[int, float, float]:
    """(worker pods, CPUs each, GPUs each): a job's Train workers; a sweep's, times the
    trials it runs at once (one without max_concurrent_trials: one at a time here)."""
    if isinstance(spec, TuneSpec):
        scaling, copies = spec.base.scaling, min(spec.max_concurrent_trials or 1, spec.total_trials)
    else:
        scaling, copies = spec.scaling, 1
    cpus, gpus = scaling.reserved
    workers = scaling.num_workers
    return workers * copies, cpus / workers, gpus / workers


def priority_of(spec: JobSpec | TuneSpec) -> str | None:
    """The job's numtune priority class: the WorkloadPriorityClass of that name labels its
    RayJob (a sweep's is its base's; None only in a row stored before classes existed)."""
    return spec.base.priority if isinstance(spec, TuneSpec) else spec.priority


class KubeRayBackend:
    def __init__(
        self,
        api: str,
        namespace: str,
        storage: str,
        job_python: str,
        *,
        image: str,
        cluster_queue: str,
        queue_of: Callable[[str], str],
        token: str | None = None,
        verify: str | bool = True,
        ray_version: str = "2.60.0",
        worker_memory_mb: int = 512,
        default_priority: str = "normal",
        env: dict[str, str] | None = None,
    ):
        self.namespace = namespace
        self.storage = storage
        self.image = image
        self.cluster_queue = cluster_queue
        self.queue_of = queue_of  # job id -> its team's LocalQueue
        self.ray_version = ray_version
        self.worker_memory_mb = worker_memory_mb
        self.default_priority = default_priority
        self.env = env or {}
        self.entrypoint = RayJobsBackend(api, storage, job_python).entrypoint  # the same command
        if token is None and (SERVICE_ACCOUNT / "token").exists():  # in-cluster
            token = (SERVICE_ACCOUNT / "token").read_text().strip()
            verify = str(SERVICE_ACCOUNT / "ca.crt")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=api, headers=headers, verify=verify, timeout=10.0)

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            reply = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise RayUnreachableError(f"Kubernetes API: {error}") from error
        if reply.status_code in (401, 403) or reply.status_code >= 500:
            message = reply.text[:300]
            raise RayUnreachableError(f"Kubernetes API: HTTP {reply.status_code}: {message}")
        return reply

    def rayjob(self, job_id: str, kind: str, spec_json: str, name: str) -> dict[str, Any]:
        """The RayJob of one submission: suspended until Kueue admits it."""
        model: type[JobSpec | TuneSpec] = TuneSpec if kind == "tune" else JobSpec
        spec = model.model_validate_json(spec_json)
        replicas, cpus, gpus = workers_of(spec)
        uri = RunFiles.for_job(job_id, self.storage).sub_uri(REQUEST)
        worker = _container("ray-worker", self.image, cpus, gpus, self.worker_memory_mb)
        head = _container("ray-head", self.image, 1, 0, 2048)  # runs the driver: coordinates
        env = "".join(f"  {k}: {v!r}\n" for k, v in self.env.items())
        body: dict[str, Any] = {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {
                    QUEUE_LABEL: self.queue_of(job_id),
                    PRIORITY_LABEL: priority_of(spec) or self.default_priority,
                    "app.kubernetes.io/managed-by": "numtune",
                    "numtune.io/job-id": job_id,
                },
            },
            "spec": {
                "suspend": True,
                "entrypoint": self.entrypoint(job_id, kind, uri),
                "shutdownAfterJobFinishes": True,
                "ttlSecondsAfterFinished": 600,
                "submissionMode": "K8sJobMode",
                "rayClusterSpec": self.cluster(head, worker, replicas),
            },
        }
        if env:
            body["spec"]["runtimeEnvYAML"] = f"env_vars:\n{env}"
        return body

    def cluster(
        self, head: dict[str, Any], worker: dict[str, Any], replicas: int
    ) -> dict[str, Any]:
        """The job's own Ray cluster: a head that runs the driver, and its workers."""
        workers = {
            "groupName": "workers",
            "replicas": replicas,
            "minReplicas": replicas,
            "maxReplicas": replicas,
            "rayStartParams": {},
            "template": {"spec": {"containers": [worker]}},
        }
        return {
            "rayVersion": self.ray_version,
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}},
            "workerGroupSpecs": [workers],
        }

    def submit(
        self, job_id: str, kind: str, spec_json: str, submission_id: str | None = None
    ) -> None:
        files = RunFiles.for_job(job_id, self.storage)
        files.write_text(REQUEST, spec_json)
        body = self.rayjob(job_id, kind, spec_json, submission_id or job_id)
        reply = self._call("POST", RAYJOBS.format(ns=self.namespace), json=body)
        if reply.status_code == 409:  # AlreadyExists: a repeated submission; follow it
            log.info("RayJob %s already exists; following it", body["metadata"]["name"])
            return
        if reply.status_code >= 300:
            raise RayUnreachableError(
                f"RayJob create: HTTP {reply.status_code}: {reply.text[:300]}"
            )

    def info(self, job_id: str) -> RayJobInfo:
        reply = self._call("GET", f"{RAYJOBS.format(ns=self.namespace)}/{job_id}")
        if reply.status_code == 404:
            raise RayJobMissingError(job_id)
        body = reply.json()
        status = body.get("status") or {}
        deployment = status.get("jobDeploymentStatus") or ""
        message = status.get("message") or status.get("reason") or None
        if status.get("jobStatus"):
            return RayJobInfo(str(status["jobStatus"]), message)
        if deployment in ("Failed", "ValidationFailed"):
            return RayJobInfo("FAILED", message or f"RayJob {deployment}")
        if (body.get("spec") or {}).get("suspend"):
            return RayJobInfo("PENDING", "queued in Kueue (RayJob suspended)")
        return RayJobInfo("PENDING", f"Ray cluster starting ({deployment or 'new'})")

    def logs(self, job_id: str) -> str:
        """The driver's output: the log of the submitter pod KubeRay's K8s Job runs."""
        pods = self._call(
            "GET",
            f"/api/v1/namespaces/{self.namespace}/pods",
            params={"labelSelector": f"job-name={job_id}"},
        ).json()
        items = pods.get("items") or []
        if not items:
            return ""
        pod = items[-1]["metadata"]["name"]
        reply = self._call("GET", f"/api/v1/namespaces/{self.namespace}/pods/{pod}/log")
        return reply.text if reply.status_code == 200 else ""

    def stop(self, job_id: str) -> None:
        path = f"{RAYJOBS.format(ns=self.namespace)}/{job_id}"
        self._call("DELETE", path, json={"propagationPolicy": "Background"})  # 404: gone

    def ping(self) -> None:
        self._call("GET", RAYJOBS.format(ns=self.namespace), params={"limit": 1})

    def capacity(self) -> Capacity | None:
        """The ClusterQueue's nominal quota as the cluster, less what Kueue has reserved
        for admitted workloads; None until the queue exists."""
        reply = self._call("GET", CLUSTER_QUEUE.format(name=self.cluster_queue))
        if reply.status_code == 404:
            return None
        body = reply.json()
        total = {"cpu": 0.0, GPU: 0.0}
        for group in body["spec"].get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for each in flavor.get("resources") or []:
                    if each["name"] in total:
                        total[each["name"]] += quantity(each["nominalQuota"])
        used = {"cpu": 0.0, GPU: 0.0}
        for flavor in (body.get("status") or {}).get("flavorsReservation") or []:
            for each in flavor.get("resources") or []:
                if each["name"] in used:
                    used[each["name"]] += quantity(each.get("total", 0))
        whole = Resources(total["cpu"], total[GPU])
        return Capacity(whole, whole - Resources(used["cpu"], used[GPU]))
