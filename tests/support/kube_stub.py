"""A small Kubernetes API server stand-in: a real HTTP server on 127.0.0.1 that keeps
RayJobs, pods and a Kueue ClusterQueue in memory, records every request, and answers as
the API server does (201 on create, 409 AlreadyExists, 404 NotFound with a Status body,
401 without the expected bearer token). Enough for service/backends/kuberay_backend.py's calls;
it runs no controller: tests set a RayJob's status as KubeRay and Kueue would."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

RAYJOB = re.compile(r"^/apis/ray\.io/v1/namespaces/([^/]+)/rayjobs(?:/([^/]+))?$")
PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+)/log)?$")
QUEUE = re.compile(r"^/apis/kueue\.x-k8s\.io/v1beta2/clusterqueues/([^/]+)$")


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    authorization: str | None
    body: Any


@dataclass
class KubeState:
    token: str
    rayjobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, tuple[str, str]] = field(default_factory=dict)  # pod -> (job-name, log)
    cluster_queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": message}  # fmt: skip


class Handler(BaseHTTPRequestHandler):
    state: KubeState

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _answer(self, code: int, body: Any) -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        ctype = "text/plain" if isinstance(body, str) else "application/json"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        auth = self.headers.get("Authorization")
        self.state.requests.append(Recorded(method, url.path, parse_qs(url.query), auth, body))
        if auth != f"Bearer {self.state.token}":
            self._answer(401, status(401, "Unauthorized", "Unauthorized"))
            return
        code, answer = self.route(method, url.path, parse_qs(url.query), body)
        self._answer(code, answer)

    def route(
        self, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        jobs = self.state.rayjobs
        if match := RAYJOB.match(path):
            name = match.group(2)
            if method == "POST" and name is None:
                name = body["metadata"]["name"]
                if name in jobs:
                    return 409, status(
                        409, "AlreadyExists", f'rayjobs.ray.io "{name}" already exists'
                    )
                jobs[name] = body
                return 201, body
            if method == "GET" and name is None:
                return 200, {"kind": "RayJobList", "items": list(jobs.values())}
            if name not in jobs:
                return 404, status(404, "NotFound", f'rayjobs.ray.io "{name}" not found')
            if method == "DELETE":
                return 200, jobs.pop(name)
            return 200, jobs[name]
        if match := PODS.match(path):
            if match.group(2) is not None:
                return 200, self.state.pods[match.group(2)][1]
            wanted = query.get("labelSelector", [""])[0].removeprefix("job-name=")
            items = [{"metadata": {"name": p, "labels": {"job-name": j}}}
                     for p, (j, _) in self.state.pods.items() if j == wanted]  # fmt: skip
            return 200, {"kind": "PodList", "items": items}
        if (match := QUEUE.match(path)) and match.group(1) in self.state.cluster_queues:
            return 200, self.state.cluster_queues[match.group(1)]
        return 404, status(404, "NotFound", f"{path} not found")

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


class KubeStub:
    """`with KubeStub("token") as kube:` serves on kube.url until the block ends."""

    def __init__(self, token: str):
        self.state = KubeState(token)
        handler = type("BoundHandler", (Handler,), {"state": self.state})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> KubeStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
