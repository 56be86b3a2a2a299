"""The only module that talks to Ray: its Job Submission API on the head's dashboard port.

A job's Ray `submission_id` is our job id, so a submission repeated after a crash finds
the job Ray already has instead of starting it twice. The entrypoint is built here from
a fixed module and values the service made (`python -m jobs run|tune <spec uri> ...`);
nothing a user sends becomes part of it, and users give no runtime_env.
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from jobs.records.models import REQUEST
from jobs.records.run_files import RunFiles
from service.queue.admission import Capacity, Resources

log = logging.getLogger(__name__)

TERMINAL_RAY = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


class RayUnreachableError(Exception):
    """Ray's Jobs API did not answer (head down, wrong address, bad Ray token)."""


class RayJobMissingError(Exception):
    """Ray does not know this submission id (e.g. the head was replaced)."""


@dataclass(frozen=True)
class RayJobInfo:
    status: str  # PENDING RUNNING SUCCEEDED FAILED STOPPED
    message: str | None


class Backend(Protocol):
    """What the service needs from a compute backend (Ray here; a stub in one benchmark)."""

    def submit(
        self, job_id: str, kind: str, spec_json: str, submission_id: str | None = None
    ) -> None: ...
    def info(self, job_id: str) -> RayJobInfo: ...
    def logs(self, job_id: str) -> str: ...
    def stop(self, job_id: str) -> None: ...
    def ping(self) -> None: ...
    def capacity(self) -> Capacity | None: ...


def ray_token() -> str | None:
    """The Ray cluster token from RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH, if set."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return os.environ["RAY_AUTH_TOKEN"].strip()
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    return Path(path).read_text().strip() if path else None


def jobs_api_answers(address: str, token: str) -> bool:
    """Whether the Jobs API at `address` answers `token`: a plain GET, without Ray's SDK,
    for `numtune up` to wait on a head it started."""
    try:
        reply = httpx.get(
            f"{address}/api/jobs/", headers={"Authorization": f"Bearer {token}"}, timeout=3.0
        )
    except httpx.HTTPError:
        return False
    return reply.status_code == 200


@functools.cache
def _transport_errors() -> tuple[type[Exception], ...]:
    """What a Jobs API call raises when the head cannot be reached or refuses the Ray token:
    Ray's AuthenticationError is its SDK's answer to HTTP 401/403 (RAY_AUTH_TOKEN missing or
    wrong), raised by any call, not a RuntimeError. Imported on the first failure: the
    service starts without loading Ray."""
    from ray.exceptions import AuthenticationError

    return (ConnectionError, OSError, AuthenticationError)


def _call_errors() -> tuple[type[Exception], ...]:
    """The above, and the SDK's RuntimeError for any other refused request."""
    return (RuntimeError, *_transport_errors())


class RayJobsBackend:
    def __init__(
        self,
        address: str,
        storage: str,
        job_python: str,
        token: str | None = None,
        env: dict[str, str] | None = None,
    ):
        self.address = address
        self.storage = storage
        self.job_python = job_python
        self.token = token  # None: RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH, if set
        self.env = env or {}  # environment variables of every job's driver (service-made)
        self._client: Any = None

    def _jobs(self) -> Any:
        # Built lazily: the constructor itself calls the head, which may not be up yet.
        if self._client is None:
            from ray.job_submission import JobSubmissionClient

            token = self.token or ray_token()
            headers = {"Authorization": f"Bearer {token}"} if token else None
            try:
                self._client = JobSubmissionClient(self.address, headers=headers)
            except _call_errors() as error:
                raise RayUnreachableError(f"Ray at {self.address}: {error}") from error
        return self._client

    def entrypoint(self, job_id: str, kind: str, spec_uri: str) -> str:
        """`<python> -m jobs run|tune <spec> --job-id|--tune-id <id> --storage <root>`."""
        verb, id_flag = ("tune", "--tune-id") if kind == "tune" else ("run", "--job-id")
        parts = [self.job_python, "-m", "jobs", verb, spec_uri, id_flag, job_id]
        return shlex.join([*parts, "--storage", self.storage])

    def submit(
        self, job_id: str, kind: str, spec_json: str, submission_id: str | None = None
    ) -> None:
        """Hand the job to Ray as `submission_id` (default the job id; a job back from
        the queue has a new one per attempt)."""
        files = RunFiles.for_job(job_id, self.storage)
        files.write_text(REQUEST, spec_json)
        entrypoint = self.entrypoint(job_id, kind, files.sub_uri(REQUEST))
        try:
            self._jobs().submit_job(
                entrypoint=entrypoint,
                submission_id=submission_id or job_id,
                metadata={"numtune_kind": kind},
                # The driver only coordinates; the workers reserve the CPUs.
                entrypoint_num_cpus=0,
                runtime_env={"env_vars": self.env} if self.env else None,
            )
        except RuntimeError as error:
            if "already exists" in str(error):
                log.info("job %s was already submitted; following it", job_id)
                return
            raise RayUnreachableError(str(error)) from error
        except _transport_errors() as error:
            raise RayUnreachableError(str(error)) from error

    def info(self, job_id: str) -> RayJobInfo:
        try:
            details = self._jobs().get_job_info(job_id)
        except RuntimeError as error:
            if "does not exist" in str(error) or "404" in str(error):
                raise RayJobMissingError(job_id) from error
            raise RayUnreachableError(str(error)) from error
        except _transport_errors() as error:
            raise RayUnreachableError(str(error)) from error
        return RayJobInfo(str(details.status.value), details.message)

    def logs(self, job_id: str) -> str:
        try:
            return str(self._jobs().get_job_logs(job_id))
        except _call_errors() as error:
            raise RayUnreachableError(str(error)) from error

    def stop(self, job_id: str) -> None:
        try:
            self._jobs().stop_job(job_id)
        except RuntimeError as error:
            if "does not exist" not in str(error):
                raise RayUnreachableError(str(error)) from error
        except _transport_errors() as error:
            raise RayUnreachableError(str(error)) from error

    def ping(self) -> None:
        try:
            self._jobs().list_jobs()
        except _call_errors() as error:
            self._client = None  # reconnect next time (the head may have restarted)
            raise RayUnreachableError(str(error)) from error

    def capacity(self) -> Capacity | None:
        """Total and unreserved CPUs/GPUs, as Ray's monitor last reported them to the
        dashboard (every few seconds); None until it has reported once."""
        try:
            # The SDK's own request helper: it carries the Ray token like every call here.
            response = self._jobs()._do_request("GET", "/api/cluster_status")
        except _call_errors() as error:
            self._client = None
            raise RayUnreachableError(str(error)) from error
        if response.status_code != 200:
            raise RayUnreachableError(f"cluster status: HTTP {response.status_code}")
        status = (response.json().get("data") or {}).get("clusterStatus") or {}
        usage = (status.get("loadMetricsReport") or {}).get("usage") or {}
        if "CPU" not in usage:
            return None
        used_cpu, total_cpu = usage["CPU"]
        used_gpu, total_gpu = usage.get("GPU", (0.0, 0.0))
        return Capacity(
            total=Resources(float(total_cpu), float(total_gpu)),
            available=Resources(
                max(0.0, float(total_cpu) - float(used_cpu)),
                max(0.0, float(total_gpu) - float(used_gpu)),
            ),
        )
