"""Limits on the request head, and read timeouts, for every port numtune listens on: the
API (`numtune api` runs uvicorn with `http=PROTOCOL`) and Ray Serve's HTTP proxy (Serve's
uvicorn takes no protocol option; `serve_proxy_callback` swaps it in, see below).

uvicorn parses HTTP/1.1 with httptools when it is installed (it is here) and httptools has
no limit on a header's size: it grows the value by concatenation, so a 120 MB header line
cost the API 54 s of CPU and every other client waited (issue 45, N1). h11, the other
parser, does cap the head (`h11_max_incomplete_event_size`) but answers 400, not 431, and
has no read timeouts either. So this protocol is uvicorn's httptools protocol with:

- a head cap: the request line and header lines together at most MAX_HEAD_BYTES, and at
  most MAX_HEADER_FIELDS fields; past either, 431 and the connection closed. Bytes are fed
  to the parser in pieces no larger than what is left of the cap, so the parser never sees
  more than the cap (plus one byte) of a head.
- a head timeout: a connection's head must arrive within HEAD_TIMEOUT_S of its first byte
  (or of the connection opening); else 408 and closed (a slow client cannot hold a
  connection by sending a byte at a time).
- a body timeout: while a request's body is still coming, BODY_IDLE_TIMEOUT_S without a
  byte closes the connection (408 when no response has started). The clock stops while
  uvicorn itself has paused reading because the application has not taken what it has.

NUMTUNE_HTTP_MAX_HEAD_BYTES, NUMTUNE_HTTP_MAX_HEADER_FIELDS, NUMTUNE_HTTP_HEAD_TIMEOUT_S and
NUMTUNE_HTTP_BODY_TIMEOUT_S change them (read once, when a server starts).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any

import httptools
import uvicorn.config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = int(os.environ.get("NUMTUNE_HTTP_MAX_HEAD_BYTES", 64 * 1024))
MAX_HEADER_FIELDS = int(os.environ.get("NUMTUNE_HTTP_MAX_HEADER_FIELDS", 100))
HEAD_TIMEOUT_S = float(os.environ.get("NUMTUNE_HTTP_HEAD_TIMEOUT_S", 10.0))
BODY_IDLE_TIMEOUT_S = float(os.environ.get("NUMTUNE_HTTP_BODY_TIMEOUT_S", 30.0))
LINGER_S = 1.0
PROTOCOL = "service.serving.http_guard:GuardedHttpToolsProtocol"
# Ray Serve calls this in each HTTP proxy before its server starts (deploy.py sets it).
PROXY_CALLBACK_ENV = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
PROXY_CALLBACK = "service.serving.http_guard:serve_proxy_callback"


class _TooManyFields(Exception):
    """Raised from the parser's header callback to stop it (httptools wraps it)."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a head cap and read timeouts (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # the bytes arriving now belong to a request's head
        self._head_bytes = 0
        self._fields = 0
        self._closed_by_us = False
        self._timer: asyncio.TimerHandle | None = None

    # ---- timers ------------------------------------------------------------------------------

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, self._timed_out)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        if self._closed_by_us or self.transport.is_closing():
            return
        if not self._in_head and self.flow.read_paused:
            self._arm(BODY_IDLE_TIMEOUT_S)  # the application is behind, not the client
            return
        what = "request head" if self._in_head else "request body"
        log.info("closing a connection from %s: its %s timed out", self.client, what)
        # Nothing to answer on a connection that never sent a byte, or once a response began.
        silent = (self._in_head and self._head_bytes == 0) or (
            not self._in_head and self.cycle is not None and self.cycle.response_started
        )
        self._refuse(408, "request_timeout", f"the {what} did not arrive in time", send=not silent)

    # ---- the connection -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(HEAD_TIMEOUT_S)  # a connection that never sends a head does not stay

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        while data and not self._closed_by_us:
            if self._in_head:
                if self._head_bytes == 0 and self._timer is None:
                    self._arm(HEAD_TIMEOUT_S)  # the next request's head has begun
                room = MAX_HEAD_BYTES - self._head_bytes
                if room <= 0:
                    self._too_large(f"more than {MAX_HEAD_BYTES} bytes")
                    return
                piece, data = data[:room], data[room:]
                self._head_bytes += len(piece)
            else:
                piece, data = data, b""
                self._arm(BODY_IDLE_TIMEOUT_S)
            self._feed(piece)

    def _feed(self, piece: bytes) -> None:
        try:
            self.parser.feed_data(piece)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError:
            if self._fields > MAX_HEADER_FIELDS:
                self._too_large(f"more than {MAX_HEADER_FIELDS} fields")
            else:
                log.warning("Invalid HTTP request received.")
                self._refuse(400, "bad_request", "invalid HTTP request")

    def _too_large(self, what: str) -> None:
        log.info("refused a request head from %s: %s", self.client, what)
        message = (
            f"request header fields too large: {what} (the request line and headers may hold"
            f" {MAX_HEAD_BYTES} bytes and {MAX_HEADER_FIELDS} fields)"
        )
        self._refuse(431, "header_too_large", message)

    def _refuse(self, status: int, code: str, message: str, *, send: bool = True) -> None:
        """Answer `status` with numtune's error body (unless a response has begun), close."""
        self._closed_by_us = True
        self._disarm()
        if send and not self.transport.is_closing():
            body = json.dumps({"error": code, "detail": message}).encode()
            head = [STATUS_LINE[status]]
            head += [
                name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers
            ]
            head += [
                b"content-type: application/json\r\n",
                b"content-length: " + str(len(body)).encode() + b"\r\n",
                b"connection: close\r\n\r\n",
            ]
            self.transport.write(b"".join(head) + body)
        if self.transport.can_write_eof():
            # A lingering close: the answer and a FIN now, what the client still sends read
            # and dropped (data_received) for LINGER_S, then closed. Closing at once with
            # its unread bytes queued would reset the connection and could lose the answer.
            self.transport.write_eof()
            self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()

    # ---- parser callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._fields = 0
        super().on_message_begin()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields += 1
        if self._fields > MAX_HEADER_FIELDS:
            raise _TooManyFields
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._arm(BODY_IDLE_TIMEOUT_S)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        # The next bytes on this connection are the next request's head.
        self._in_head, self._head_bytes = True, 0
        self._disarm()
        super().on_message_complete()


def serve_proxy_callback() -> list[Any]:
    """Ray Serve's HTTP proxy callback (RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH): it runs
    in the proxy's process before the proxy builds its uvicorn server, whose protocol is
    "auto". Serve's HTTPOptions carry no parser option, so "auto" is pointed at the guarded
    protocol here, in that process only. No middlewares are added."""
    uvicorn.config.HTTP_PROTOCOLS["auto"] = PROTOCOL
    log.info("Serve proxy: request heads capped at %d bytes (%s)", MAX_HEAD_BYTES, PROTOCOL)
    return []
