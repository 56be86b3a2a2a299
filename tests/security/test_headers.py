"""Issue 45 item 1 (N1): a request head is capped and must arrive in time, on every port
numtune listens on. A 120 MB header with no token is answered 431 after the first 64 KB
and the connection closed, and another owner's requests meanwhile take about what they
take alone (before: the API parsed it for 54 s and `GET /v1/jobs?limit=1` took 39 s); too
many fields is a 431 too; a head or body that trickles in is cut off (408).

The API is served by a real uvicorn with the options `numtune api` passes
(server_options()); Serve's proxy server is built by Ray's own code (http_util) with the
proxy callback deploy.py names, as in a proxy actor. The Serve proxy on a live Ray: the
serving campaign of tests/integration/test_schemathesis.py."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn.config
from ray.serve._private import http_util
from ray.serve.config import HTTPOptions

from service.app import create_app
from service.cli.main import server_options
from service.serving import http_guard
from service.settings import Settings
from tests.security.conftest import ADMIN, auth
from tests.security.http_abuse import MB, big_header, during, many_fields, send, trickle
from tests.support.live_server import live_server
from tests.support.stub_backend import StubBackend

SLACK_S = 0.5  # what a loaded 2-core machine adds to a 10-50 ms request, at most


@contextmanager
def api(home: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """The API as `numtune api` serves it, and bob's read token."""
    settings = Settings(home=home, admin_token=ADMIN)
    app = create_app(settings, backend=StubBackend(), reconcile=False)
    with live_server(app, **server_options()) as url:
        made = httpx.post(f"{url}/v1/tokens", json={"owner": "bob", "scopes": ["read"]},
                          headers=auth(), timeout=10)  # fmt: skip
        assert made.status_code == 201, made.text
        yield url, auth(made.json()["token"])


def test_a_120_mb_header_is_refused_and_another_owner_is_not_slowed(tmp_path: Path) -> None:
    with api(tmp_path) as (url, bob):

        def bobs_list() -> None:
            r = httpx.get(f"{url}/v1/jobs", params={"limit": 1}, headers=bob, timeout=10)
            assert r.status_code == 200, r.text

        answer, alone, slowest = during(
            lambda: send(url, big_header("/healthz", 120 * MB)), bobs_list
        )
        assert answer.status == 431, answer
        assert b"header_too_large" in answer.body and b"65536 bytes" in answer.body
        assert answer.sent < 8 * MB and answer.seconds < 5, answer  # refused early
        assert slowest < alone + SLACK_S, (alone, slowest)
        # Too many fields, each small: 431 as well; a head within both limits is served.
        assert send(url, many_fields("/healthz", 101)).status == 431
        assert send(url, many_fields("/healthz", 90)).status == 200
        assert send(url, big_header("/healthz", 60 * 1024)).status == 200


def test_a_trickling_head_or_body_is_cut_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_guard, "HEAD_TIMEOUT_S", 0.6)
    monkeypatch.setattr(http_guard, "BODY_IDLE_TIMEOUT_S", 0.6)
    with api(tmp_path) as (url, _):
        # A byte every 0.2 s would hold the connection for ever; the head has 0.6 s.
        head = trickle(b"GET /healthz HTTP/1.1\r\n", b"X-Slow: " + b"a" * 40, 0.2)
        answer = send(url, head)
        assert answer.status == 408 and b"request head" in answer.body, answer
        assert answer.seconds < 3, answer
        # A body that stops coming: the route waits on it, the connection does not.
        request = (
            "POST /v1/tokens HTTP/1.1\r\nHost: numtune\r\nContent-Type: application/json\r\n"
            f'Authorization: Bearer {ADMIN}\r\nContent-Length: 100\r\n\r\n{{"owner"'
        ).encode()
        answer = send(url, trickle(request, b"", 0), timeout_s=10)
        assert answer.status == 408 and b"request body" in answer.body, answer
        assert answer.seconds < 3, answer
        # A connection that never sends a byte is closed as well.
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as idle:
            assert idle.recv(1) == b""


def test_the_serve_proxys_server_takes_the_same_guard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ray Serve's proxy builds its uvicorn server in http_util with protocol "auto" and
    runs the RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH callback first: with deploy.py's
    callback, that server refuses a 120 MB header at once and keeps serving others."""
    monkeypatch.setattr(
        http_util, "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", http_guard.PROXY_CALLBACK
    )
    monkeypatch.setitem(
        uvicorn.config.HTTP_PROTOCOLS, "auto", uvicorn.config.HTTP_PROTOCOLS["auto"]
    )
    with proxy_server(
        http_util.configure_http_middlewares(HTTPOptions(host="127.0.0.1", port=0))
    ) as url:

        def models() -> None:
            assert httpx.get(f"{url}/v1/models", timeout=10).status_code == 200

        answer, alone, slowest = during(
            lambda: send(url, big_header("/v1/models", 120 * MB)), models
        )
    assert answer.status == 431 and answer.seconds < 5, answer
    assert slowest < alone + SLACK_S, (alone, slowest)


async def _ok(scope: MutableMapping[str, Any], receive: Any, send_: Any) -> None:
    await send_({"type": "http.response.start", "status": 200, "headers": []})
    await send_({"type": "http.response.body", "body": b"{}"})


@contextmanager
def proxy_server(options: HTTPOptions) -> Iterator[str]:
    """Ray's start_asgi_http_server on a loop of its own, on a free port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        options.port = probe.getsockname()[1]
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        holder["task"], holder["server"] = await http_util.start_asgi_http_server(
            _ok, options, event_loop=loop
        )
        while not holder["server"].started:
            await asyncio.sleep(0.01)
        started.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    assert started.wait(10)
    try:
        yield f"http://127.0.0.1:{options.port}"
    finally:
        holder["server"].should_exit = True
        asyncio.run_coroutine_threadsafe(asyncio.wait_for(holder["task"], 10), loop).result(15)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
