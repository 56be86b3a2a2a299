"""The only module that talks to Ray: its Jobs REST API on the head's dashboard port.

A job's Ray `submission_id` is our job id, so a submission repeated after a crash finds
the job Ray already has instead of starting it twice. The entrypoint is built here from
a fixed module and values the service made (`python -m jobs run|tune <spec uri> ...`);
nothing a user sends becomes part of it, and users give no runtime_env.
"""

from __future__ import annotations

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
# Ray answers within seconds; logs can be long (the service caps what it keeps at 20 MB).
TIMEOUT = httpx.Timeout(60.0, connect=10.0)

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
    """The Ray cluster token where Ray's own clients look: RAY_AUTH_TOKEN, the file named by
    RAY_AUTH_TOKEN_PATH, else, with token auth on (RAY_AUTH_MODE=token, as `ray.init` sets
    it for a cluster it starts), Ray's default token file ~/.ray/auth_token."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return os.environ["RAY_AUTH_TOKEN"].strip()
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return Path(path).read_text().strip()
    default = Path.home() / ".ray" / "auth_token"
    if os.environ.get("RAY_AUTH_MODE") == "token" and default.is_file():
        return default.read_text().strip()
    return None


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


class RayJobsBackend:
    """Ray's Jobs REST API (POST /api/jobs/, GET /api/jobs/<id>, .../logs, .../stop), spoken
    over httpx: its answers are told apart by HTTP status code (404: no such job), never by
    their text, which Ray's SDK offers as the only difference between its RuntimeErrors."""

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
        self._http: httpx.Client | None = None

    def _client(self) -> httpx.Client:
        # Built at the first call: the token file may appear after the service starts.
        if self._http is None:
            token = self.token or ray_token()
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            self._http = httpx.Client(base_url=self.address, headers=headers, timeout=TIMEOUT)
        return self._http

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Ray's reply, whatever its status; RayUnreachableError where there is none (head
        down, bad address) or where Ray refuses the token (401, 403: RAY_AUTH_TOKEN missing
        or wrong), which leaves the service as unable to act as a head that is down."""
        try:
            reply = self._client().request(method, path, **kwargs)
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise RayUnreachableError(f"Ray at {self.address}: {error}") from error
        if reply.status_code in (httpx.codes.UNAUTHORIZED, httpx.codes.FORBIDDEN):
            self._reconnect()  # the token is read again next time
            raise RayUnreachableError(
                f"Ray at {self.address} answered HTTP {reply.status_code}: Authentication "
                "required (is RAY_AUTH_TOKEN the cluster's token?)"
            )
        return reply

    def _reconnect(self) -> None:
        if self._http is not None:
            self._http.close()
        self._http = None

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
        submission = submission_id or job_id
        request: dict[str, Any] = {
            "entrypoint": self.entrypoint(job_id, kind, files.sub_uri(REQUEST)),
            "submission_id": submission,
            "metadata": {"numtune_kind": kind},
            # The driver only coordinates; the workers reserve the CPUs.
            "entrypoint_num_cpus": 0,
        }
        if self.env:
            request["runtime_env"] = {"env_vars": self.env}
        reply = self._request("POST", "/api/jobs/", json=request)
        if reply.status_code == httpx.codes.OK:
            return
        # Ray answers a submission id it already has with the 400 of any invalid request:
        # whether it has the job tells the two apart (a submission repeated after a crash).
        if self._request("GET", f"/api/jobs/{submission}").status_code == httpx.codes.OK:
            log.info("job %s was already submitted; following it", job_id)
            return
        raise RayUnreachableError(f"Ray refused the submission: HTTP {reply.status_code}")

    def info(self, job_id: str) -> RayJobInfo:
        reply = self._request("GET", f"/api/jobs/{job_id}")
        if reply.status_code == httpx.codes.NOT_FOUND:
            raise RayJobMissingError(job_id)
        details = self._json(reply, "job info")
        return RayJobInfo(str(details["status"]), details.get("message"))

    def logs(self, job_id: str) -> str:
        return str(self._json(self._request("GET", f"/api/jobs/{job_id}/logs"), "logs")["logs"])

    def stop(self, job_id: str) -> None:
        reply = self._request("POST", f"/api/jobs/{job_id}/stop")
        if reply.status_code != httpx.codes.NOT_FOUND:  # no such job: nothing to stop
            self._json(reply, "stop")

    def ping(self) -> None:
        try:
            reply = self._request("GET", "/api/jobs/")  # a JSON list of every job
            if reply.status_code != httpx.codes.OK:
                raise RayUnreachableError(f"Ray's job list: HTTP {reply.status_code}")
        except RayUnreachableError:
            self._reconnect()  # afresh next time (the head may have restarted)
            raise

    def capacity(self) -> Capacity | None:
        """Total and unreserved CPUs/GPUs, as Ray's monitor last reported them to the
        dashboard (every few seconds); None until it has reported once.

        The dashboard's cluster view's endpoint: Ray's public APIs report what is unreserved
        only to a process that joins the cluster as a driver (`ray.available_resources`);
        its state API (`ray.util.state.list_nodes`) gives each node's total alone."""
        try:
            data = self._json(self._request("GET", "/api/cluster_status"), "cluster status")
        except RayUnreachableError:
            self._reconnect()
            raise
        status = (data.get("data") or {}).get("clusterStatus") or {}
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

    @staticmethod
    def _json(reply: httpx.Response, what: str) -> dict[str, Any]:
        """A 200's JSON object; any other answer is Ray failing the request."""
        if reply.status_code != httpx.codes.OK:
            raise RayUnreachableError(f"Ray's {what}: HTTP {reply.status_code} {reply.text[:300]}")
        try:
            body = reply.json()
        except ValueError as error:
            raise RayUnreachableError(f"Ray's {what}: not JSON") from error
        if not isinstance(body, dict):
            raise RayUnreachableError(f"Ray's {what}: not a JSON object")
        return body
