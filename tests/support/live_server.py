"""Serve an ASGI app with a real uvicorn server on 127.0.0.1, in a background thread.

Tests that must talk HTTP over a socket (schemathesis against the live OpenAPI schema,
clients that are not in-process) use this instead of TestClient:

    with live_server(create_app(settings, backend=StubBackend())) as base_url:
        httpx.get(f"{base_url}/healthz")

The socket is bound here (port 0: the kernel picks a free port) and handed to uvicorn,
so there is no race between choosing a port and binding it. Leaving the block asks the
server to exit, waits for its lifespan shutdown and joins the thread.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def live_server(
    app: Any,
    *,
    startup_timeout_s: float = 30.0,
    shutdown_timeout_s: float = 30.0,
    log_level: str = "warning",
    **options: Any,
) -> Iterator[str]:
    """Yield `http://127.0.0.1:<port>` while uvicorn serves `app`; stop it on exit.
    `options` go to uvicorn.Config (e.g. `numtune api`'s server_options())."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # lifespan="on": the app's startup (reconciler, metrics collector) must run, and a
    # startup failure must stop the server rather than serve a half-built app.
    config = uvicorn.Config(app, lifespan="on", log_level=log_level, access_log=False, **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout_s
        while not server.started:
            if not thread.is_alive():
                # uvicorn logs the cause (e.g. the lifespan startup's exception) itself.
                raise RuntimeError(f"uvicorn on 127.0.0.1:{port} exited during startup")
            if time.monotonic() > deadline:
                raise TimeoutError(f"uvicorn on 127.0.0.1:{port} not up in {startup_timeout_s}s")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(shutdown_timeout_s)
        sock.close()
        if thread.is_alive():
            # A request that never ends (an SSE stream) would keep a graceful exit waiting.
            server.force_exit = True
            thread.join(5.0)
        if thread.is_alive():
            raise RuntimeError(f"uvicorn on 127.0.0.1:{port} did not stop")
