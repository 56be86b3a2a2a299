"""A Ray head that refuses the service's Ray token (none set, or a wrong one) is Ray
unreachable to the service, as a down head is: /readyz answers 503 naming ray, not 500.

The real RayJobsBackend and Ray's own Jobs SDK talk to a loopback HTTP server that answers
every request 401, as a head with RAY_AUTH_MODE=token does to a request without its token.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.backends.ray_backend import RayJobsBackend, RayUnreachableError
from service.settings import Settings

ADMIN = "adm_Re4kWq8Nz1Vx6Bt3Yp9Lc2Hs7Dm5Gf0J"


class _Refuses(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"Unauthorized: Missing authentication token"
        self.send_response(401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *_: object) -> None:  # keep pytest's output clean
        return


@pytest.fixture
def refusing_head() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_refused_token_is_ray_unreachable(refusing_head: str, tmp_path: Path) -> None:
    backend = RayJobsBackend(refusing_head, str(tmp_path), "python", token="not-the-token")
    with pytest.raises(RayUnreachableError, match="Authentication required"):
        backend.ping()
    with pytest.raises(RayUnreachableError):
        backend.info("job-1")


def test_readyz_says_ray_is_unreachable(refusing_head: str, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, admin_token=ADMIN)
    backend = RayJobsBackend(refusing_head, str(tmp_path / "storage"), "python")
    with TestClient(create_app(settings, backend=backend, reconcile=False)) as client:
        r = client.get("/readyz", headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 503, r.text
    assert r.json()["checks"]["ray"] == "error: unreachable"
