"""One exception per failure a caller can act on, and the JSON body every error has:
`{"error": CODE, "detail": ...}` — never a stack trace."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)


class APIError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, detail: Any, *, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.detail = detail
        self.headers = headers


class Unauthorized(APIError):
    status, code = 401, "unauthorized"


class Forbidden(APIError):
    status, code = 403, "forbidden"


class NotFound(APIError):
    status, code = 404, "not_found"


class Conflict(APIError):
    status, code = 409, "conflict"


class PayloadTooLarge(APIError):
    status, code = 413, "body_too_large"


class QuotaExceeded(APIError):
    status, code = 413, "quota_exceeded"


class UnsupportedMediaType(APIError):
    status, code = 415, "unsupported_media_type"


class InvalidSpec(APIError):
    status, code = 422, "invalid_spec"


class InvalidRequest(APIError):
    status, code = 422, "invalid_request"


class TooManyRequests(APIError):
    status, code = 429, "too_many_requests"


class RayUnavailable(APIError):
    status, code = 503, "ray_unreachable"


class FieldProblem(BaseModel):
    field: str
    message: str


class ErrorOut(BaseModel):
    """The body of every error response."""

    error: str
    detail: str | list[FieldProblem]


_ERROR_STATUSES = {
    400: "The body could not be parsed",
    401: "Missing, unknown or revoked bearer token",
    403: "The token lacks the scope this needs",
    404: "No such resource (or it belongs to another owner)",
    409: "Conflicts with the resource's state or an earlier Idempotency-Key",
    413: "The body is larger than the service accepts",
    415: "The body is not application/json",
    422: "Invalid request: each problem names its field",
    503: "Ray cannot be reached",
}
# Declared on every route: these are the errors any of them can answer with. Declaring
# 422 here also replaces FastAPI's default 422 schema, which is not our body.
RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": text} for status, text in _ERROR_STATUSES.items()
}


def error_body(code: str, detail: Any) -> dict[str, Any]:
    return {"error": code, "detail": detail}


# A 404 names what was asked for ("no job 'x'"): a quoted value past ECHO_CHARS is cut to its
# start and length, so a 10,000-character id is not sent back whole (issue 45, N14).
ECHO_CHARS = 64
_QUOTED = re.compile("'([^']{%d,})'|\"([^\"]{%d,})\"" % ((ECHO_CHARS + 1,) * 2))  # noqa: UP031


def bounded(detail: Any) -> Any:
    """`detail` with each quoted value longer than ECHO_CHARS shortened."""
    if not isinstance(detail, str):
        return detail

    def cut(match: re.Match[str]) -> str:
        value = match[1] or match[2]
        return f"'{value[:ECHO_CHARS]}…' ({len(value)} characters)"

    return _QUOTED.sub(cut, detail)


# Our validators word cross-field errors as "field.path: message"; lift that path out.
_NAMED = re.compile(r"^([a-z_][a-z0-9_.]*): (.+)$", re.DOTALL)


def field_errors(error: RequestValidationError) -> list[dict[str, str]]:
    """pydantic's errors as {field, message}; the field is the dotted path in the body."""
    out = []
    for e in error.errors():
        loc = [str(p) for p in e.get("loc", ())]
        if loc and loc[0] == "body":
            loc = loc[1:]
        message = str(e.get("msg", "")).removeprefix("Value error, ")
        if e.get("type") == "json_invalid":
            where = f" at character {loc[0]}" if loc else ""
            loc, message = [], f"the body is not valid JSON{where}"
        loc, message = split_named(loc, message)
        out.append({"field": ".".join(loc) or "(body)", "message": message})
    return out


def split_named(loc: list[str], message: str) -> tuple[list[str], str]:
    """A validator's "field: problem" message names a field below `loc`: move it there."""
    named = _NAMED.match(message)
    return ([*loc, named.group(1)], named.group(2)) if named else (loc, message)


# How an error becomes a body: (request, code, detail) → JSON. The control plane always
# uses error_body; serving answers its OpenAI routes in OpenAI's shape.
BodyFn = Callable[[Request, str, Any], dict[str, Any]]


def install(app: FastAPI, body: BodyFn | None = None) -> None:
    shape: BodyFn = body or (lambda _request, code, detail: error_body(code, detail))

    @app.exception_handler(APIError)
    async def _api_error(request: Request, error: APIError) -> JSONResponse:
        detail = bounded(error.detail) if error.status == 404 else error.detail
        return JSONResponse(shape(request, error.code, detail), error.status, headers=error.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse(shape(request, "invalid_request", field_errors(error)), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> JSONResponse:
        code = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}.get(
            error.status_code, "error"
        )
        return JSONResponse(shape(request, code, error.detail), error.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unhandled error")
        detail = "internal error; see the service log"
        return JSONResponse(shape(request, "internal", detail), 500)
