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
    """413 above `max_bytes` (declared or streamed); 415 for a body that is not JSON.
    `uploads` maps the paths that take a multipart file upload to their own limit, `large`
    the JSON bodies that have one (a study's kept work); paths
    under `form_prefix` (the dashboard's HTML forms, CSRF-checked there) take urlencoded
    forms instead of JSON."""

    def __init__(
        self,
        app: Any,
        max_bytes: int,
        uploads: dict[str, int] | None = None,
        form_prefix: str | None = None,
        large: dict[str, int] | None = None,
    ):
        self.app = app
        self.max_bytes = max_bytes
        self.uploads = uploads or {}
        self.large = large or {}
        self.form_prefix = form_prefix

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in JSON_BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        upload = scope["method"] == "POST" and scope["path"] in self.uploads
        max_bytes = self.uploads[scope["path"]] if upload else self.max_bytes
        if scope["method"] == "POST" and scope["path"] in self.large:
            max_bytes = self.large[scope["path"]]
        wanted = b"multipart/form-data" if upload else b"application/json"
        if self.form_prefix and scope["path"].startswith(self.form_prefix):
            wanted = b"application/x-www-form-urlencoded"
        too_large = f"request bodies are limited to {max_bytes} bytes"
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > max_bytes):
            await _reply(send, 413, "body_too_large", too_large)
            return
        has_body = length not in (None, b"0") or b"transfer-encoding" in headers
        ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if has_body and ctype != wanted:
            shown = ctype.decode(errors="replace") or "none"
            await _reply(
                send, 415, "unsupported_media_type", f"send {wanted.decode()}, not {shown}"
            )
            return
        seen = 0
        over = False

        async def counted() -> dict[str, Any]:
            nonlocal seen, over
            message: dict[str, Any] = await receive()
            seen += len(message.get("body", b""))
            if seen > max_bytes:
                over = True
                # Hand the app an empty, final body; the 413 below replaces its answer.
                return {"type": "http.request", "body": b"", "more_body": False}
            return message

        started = False

        async def guarded_send(message: dict[str, Any]) -> None:
            nonlocal started
            if over:
                if not started:
                    started = True
                    await _reply(send, 413, "body_too_large", too_large)
                return
            await send(message)

        await self.app(scope, counted, guarded_send)
