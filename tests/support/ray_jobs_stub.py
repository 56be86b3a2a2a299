"""A stand-in for a Ray head's Jobs REST API: a real HTTP server on 127.0.0.1 that keeps
submitted jobs in memory, records every request and answers with the status codes Ray
2.60's dashboard gives (ray/dashboard/modules/job/job_head.py): 200 with JSON; 400 for a
submission id it already has (as for any invalid request); 404 for a job it does not know;
401 without the cluster's token. Enough for service/backends/ray_backend.py; it runs nothing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class RayJobsState:
    token: str
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # submission id -> details
    logs: dict[str, str] = field(default_factory=dict)
    # /api/cluster_status's loadMetricsReport usage: resource -> [used, total]
    usage: dict[str, list[float]] = field(default_factory=dict)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)  # method, path, body
    invalid: bool = False  # answer every submission 400, as Ray does a request it cannot parse


class Handler(BaseHTTPRequestHandler):
    state: RayJobsState

    def _handle(self, method: str) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(size)) if size else None
        self.state.requests.append((method, self.path, body))
        if self.headers.get("Authorization") == f"Bearer {self.state.token}":
            code, reply = self._route(method, self.path.rstrip("/").split("/")[1:], body)
        else:
            code, reply = 401, "Unauthorized: Missing authentication token"
        # Ray's errors are plain text, its answers JSON.
        text = isinstance(reply, str)
        data = (reply if text else json.dumps(reply)).encode()
        kind = "text/plain" if text else "application/json"
        self.send_response(code)
        for name, value in (("Content-Type", kind), ("Content-Length", str(len(data)))):
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str, parts: list[str], body: Any) -> tuple[int, Any]:
        jobs = self.state.jobs
        if parts == ["api", "cluster_status"]:
            report = {"loadMetricsReport": {"usage": self.state.usage}}
            return 200, {"result": True, "data": {"clusterStatus": report}}
        if parts == ["api", "jobs"]:
            if method == "GET":
                return 200, list(jobs.values())
            if self.state.invalid:
                return 400, "TypeError: unexpected keyword"
            if body["submission_id"] in jobs:
                return 400, f"Job with submission_id {body['submission_id']} already exists."
            jobs[body["submission_id"]] = {**body, "status": "PENDING", "message": None}
            return 200, {"submission_id": body["submission_id"]}
        job = parts[2] if len(parts) > 2 else ""
        if job not in jobs:
            return 404, f"Job {job} does not exist"
        if parts[3:] == ["logs"]:
            return 200, {"logs": self.state.logs.get(job, "")}
        if parts[3:] == ["stop"]:
            running = jobs[job]["status"] in ("PENDING", "RUNNING")
            jobs[job]["status"] = "STOPPED"
            return 200, {"stopped": running}
        return 200, jobs[job]

    def log_message(self, *args: Any) -> None:  # keep pytest's output clean
        return

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")


@contextmanager
def ray_jobs_api(token: str) -> Iterator[tuple[str, RayJobsState]]:
    """Yield (address, state) while the stand-in serves; stop it on exit."""
    state = RayJobsState(token)
    handler = type("BoundHandler", (Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # A short poll: shutdown() waits up to one interval.
    serve = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    serve.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
