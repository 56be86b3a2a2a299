"""Request guards that run before routing: body size and content type.

Plain ASGI (no BaseHTTPMiddleware) so they add almost nothing per request.
"""

from __future__ import annotations

import json
from typing import Any

JSON_BODY_METHODS = {"POST", "PUT", "PATCH"}


async def _reply(send: Any, status: int, code: str, detail: str) -> None:
    body = json.dumps({"error": code, "detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyGuard:
    """413 above `max_bytes` (declared or streamed); 415 for a body that is not JSON."""

    def __init__(self, app: Any, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in JSON_BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await _reply(
                send, 413, "body_too_large", f"request bodies are limited to {self.max_bytes} bytes"
            )
            return
        has_body = length not in (None, b"0") or b"transfer-encoding" in headers
        ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if has_body and ctype != b"application/json":
            shown = ctype.decode(errors="replace") or "none"
            await _reply(send, 415, "unsupported_media_type", f"send application/json, not {shown}")
            return
        seen = 0
        too_large = False

        async def counted() -> dict[str, Any]:
            nonlocal seen, too_large
            message: dict[str, Any] = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                too_large = True
                # Hand the app an empty, final body; the 413 below replaces its answer.
                return {"type": "http.request", "body": b"", "more_body": False}
            return message

        started = False

        async def guarded_send(message: dict[str, Any]) -> None:
            nonlocal started
            if too_large:
                if not started:
                    started = True
                    await _reply(
                        send,
                        413,
                        "body_too_large",
                        f"request bodies are limited to {self.max_bytes} bytes",
                    )
                return
            await send(message)

        await self.app(scope, counted, guarded_send)
