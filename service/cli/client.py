"""The CLI's REST client (httpx): where the service is, which token to send, and every
failure turned into one line a person can act on (`ClientError`), never a traceback."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import httpx

from service.platform.local_files import read_secret

DEFAULT_URL = "http://127.0.0.1:8080"


class ClientError(Exception):
    """A failure to show as is; `code` is the process exit code."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.message = message
        self.code = code


def _recorded(home: Path, key: str) -> object:
    """A value `numtune up` recorded in <home>/run/state.json (None when not running)."""
    state = home / "run" / "state.json"
    if not state.exists():
        return None
    try:
        return json.loads(state.read_text()).get(key)
    except ValueError as error:
        raise ClientError(f"{state} is not valid JSON ({error}); set NUMTUNE_URL") from error


def resolve_url(home: Path) -> str:
    """NUMTUNE_URL, else the URL `numtune up` recorded in <home>/run/state.json, else default."""
    if os.environ.get("NUMTUNE_URL"):
        return os.environ["NUMTUNE_URL"].rstrip("/")
    url = _recorded(home, "api_url")
    return str(url).rstrip("/") if url else DEFAULT_URL


def resolve_serve_url(home: Path) -> str:
    """NUMTUNE_SERVE_URL, else the serving port `numtune up` recorded, else :8000."""
    if os.environ.get("NUMTUNE_SERVE_URL"):
        return os.environ["NUMTUNE_SERVE_URL"].rstrip("/")
    port = _recorded(home, "serve_port")
    return f"http://127.0.0.1:{port or 8000}"


def resolve_token(home: Path) -> str | None:
    """NUMTUNE_TOKEN, else NUMTUNE_ADMIN_TOKEN, else the dev admin token in <home>."""
    for name in ("NUMTUNE_TOKEN", "NUMTUNE_ADMIN_TOKEN"):
        if os.environ.get(name):
            return os.environ[name].strip()
    path = home / "admin-token"
    if path.exists():
        return read_secret(path) or None
    return None


def describe_error(response: httpx.Response) -> str:
    """The API's `{"error", "detail"}` as text; 422 details one field per line."""
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:300].strip() or '(empty body)'}"
    if not isinstance(body, dict):
        return f"HTTP {response.status_code}: {body!r:.300}"
    code, detail = body.get("error", "error"), body.get("detail")
    if isinstance(detail, list) and all(isinstance(d, dict) and "field" in d for d in detail):
        fields = "\n".join(f"  {d['field']}: {d.get('message', '')}" for d in detail)
        return f"{code} ({response.status_code}):\n{fields}"
    text = f"{code} ({response.status_code}): {detail}"
    if response.status_code == 401:
        text += " — set NUMTUNE_TOKEN to a valid token"
    return text


class Client:
    def __init__(self, url: str, token: str | None, timeout_s: float = 30.0):
        self.url = url
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=timeout_s)

    def _unreachable(self, error: httpx.HTTPError) -> ClientError:
        if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
            return ClientError(f"cannot reach numtune at {self.url} — is `numtune up` running?")
        return ClientError(f"request to {self.url} failed: {type(error).__name__}: {error}")

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        try:
            response = self.http.request(
                method, path, json=body, params=_clean(params), headers=headers
            )
        except httpx.HTTPError as error:
            raise self._unreachable(error) from error
        if response.status_code >= 400:
            raise ClientError(describe_error(response))
        return response

    def upload(self, path: str, file: BinaryIO, name: str, fields: dict[str, str]) -> Any:
        """POST a multipart file upload; the reply's JSON."""
        try:
            response = self.http.post(path, files={"file": (name, file)}, data=fields)
        except httpx.HTTPError as error:
            raise self._unreachable(error) from error
        if response.status_code >= 400:
            raise ClientError(describe_error(response))
        return response.json()

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()

    def events(self, path: str, params: dict[str, Any] | None = None) -> Iterator[tuple[str, str]]:
        """Server-sent events as (event, data); data lines of one event joined by newlines."""
        timeout = httpx.Timeout(30.0, read=None)  # a quiet job may say nothing for minutes
        try:
            with self.http.stream("GET", path, params=_clean(params), timeout=timeout) as reply:
                if reply.status_code >= 400:
                    reply.read()
                    raise ClientError(describe_error(reply))
                event, data = "message", list[str]()
                for line in reply.iter_lines():
                    if not line:
                        if data or event != "message":
                            yield event, "\n".join(data)
                        event, data = "message", []
                    elif line.startswith("data:"):
                        data.append(line[5:].removeprefix(" "))
                    elif line.startswith("event:"):
                        event = line[6:].strip()
        except httpx.HTTPError as error:
            raise self._unreachable(error) from error

    def close(self) -> None:
        self.http.close()


def _clean(params: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if params is None else {k: v for k, v in params.items() if v is not None}
