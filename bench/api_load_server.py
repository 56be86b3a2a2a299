"""bench/api_load.py's server: the API under test in its own process (`uvicorn --factory`,
N workers, a throw-away SQLite file or PostgreSQL server, Ray stubbed), and its CPU time."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil

from service.health.observability import MULTIPROC_ENV

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TOKEN = "bench_admin_Hx5Kw9Qz2Rv7Mt4Lb8Nc3Pj6"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LOOP = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
HTTP = "httptools" if importlib.util.find_spec("httptools") else "h11"


def make_app() -> Any:
    """The uvicorn factory, run in the server process (settings from NUMTUNE_* vars)."""
    from service.app import create_app
    from service.settings import Settings
    from tests.support.stub_backend import StubBackend

    reconcile = os.environ.get("API_LOAD_RECONCILE", "1") == "1"
    return create_app(Settings(), backend=StubBackend(status="SUCCEEDED"), reconcile=reconcile)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def database(kind: str, home: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{home / 'numtune.db'}"
        return
    from tests.support.postgres import postgres_server

    with postgres_server() as url:
        yield url


@contextmanager
def api_server(
    home: Path, db_url: str, *, reconcile: bool, workers: int
) -> Iterator[tuple[str, int]]:
    """(base URL, server PID) while `uvicorn --factory bench.api_load_server:make_app` serves
    (from the checkout, on PYTHONPATH)."""
    port = free_port()
    cmd = [sys.executable, "-m", "uvicorn", "bench.api_load_server:make_app", "--factory"]
    cmd += ["--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--workers", str(workers), "--loop", LOOP, "--http", HTTP, "--no-access-log"]
    cmd += ["--log-level", "warning"]
    env = {**os.environ, "NUMTUNE_HOME": str(home), "NUMTUNE_ADMIN_TOKEN": TOKEN}
    env.update(NUMTUNE_DB_URL=db_url, API_LOAD_RECONCILE="1" if reconcile else "0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    if workers > 1:  # as `numtune api --workers N` does: the workers' metrics summed
        env[MULTIPROC_ENV] = str(home / "metrics")
        (home / "metrics").mkdir()
    server = subprocess.Popen(cmd, cwd=REPO, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_workers(url, server, workers)
        yield url, server.pid
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def wait_for_workers(url: str, server: subprocess.Popen[bytes], workers: int) -> None:
    """Until `workers` distinct processes have answered /readyz (each request on a new
    connection, which the kernel hands to any worker listening)."""
    seen: set[int] = set()
    deadline = time.monotonic() + 120
    while len(seen) < workers:
        if server.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {server.returncode} during startup")
        try:
            reply = httpx.get(f"{url}/readyz", headers=AUTH, timeout=5)
            if reply.status_code == 200:
                seen.add(reply.json()["reconciler_lease"]["pid"])
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(seen)} of {workers} workers answered on {url} in 120 s")
        time.sleep(0.1)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` and its children (the workers) so far."""
    tree = psutil.Process(pid)
    return sum(sum(p.cpu_times()[:2]) for p in [tree, *tree.children(recursive=True)])
