"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import logging
import os
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy.exc import SQLAlchemyError

from service.auth.callers import Admin, Reader
from service.backends.ray_backend import RayUnreachableError
from service.deps import BackendDep, DatabaseDep
from service.health.observability import exposition

log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process answers (no token needed)."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(request: Request, db: DatabaseDep, backend: BackendDep, _: Reader) -> JSONResponse:
    """Ready when the database and Ray's Jobs API both answer and the reconciler keeps
    passing; 503 names what does not."""
    checks: dict[str, str] = {}
    try:
        db.ping()
        checks["database"] = "ok"
    except SQLAlchemyError as error:
        checks["database"] = f"error: {type(error).__name__}"
    try:
        backend.ping()
        checks["ray"] = "ok"
    except RayUnreachableError as error:
        # Ray's own text names hosts, ports and paths: the log gets it, the caller does not.
        log.warning("readyz: Ray unreachable: %s", error)
        checks["ray"] = "error: unreachable"
    reconciler = request.app.state.reconciler
    for name, loop in (("reconciler", reconciler), ("registrar", request.app.state.registrar)):
        health = loop.health()
        if health != "not started":  # an app built without one (tests, tools)
            checks[name] = health
    ready = all(v == "ok" for v in checks.values())
    body: dict[str, Any] = {"status": "ready" if ready else "not_ready", "checks": checks}
    # Of several API processes one runs the reconciler; the others stand by (both ready).
    body["reconciler_lease"] = {"held": reconciler.leading, "pid": os.getpid()}
    return JSONResponse(body, 200 if ready else 503)


@router.get("/metrics", response_class=Response)
def metrics(request: Request, _: Admin) -> Response:
    """Prometheus text format: requests and latencies (every API worker's, summed), jobs
    by status. Admin only: the job counts cover every owner."""
    body = exposition(request.app.state.jobs_collector)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def schema_router() -> APIRouter:
    """/openapi.json behind a read token, for deployments that do not publish their docs
    (the browsable /docs would need the token in the browser, so it is off then)."""
    docs = APIRouter(tags=["health"])

    @docs.get("/openapi.json", include_in_schema=False)
    def openapi(request: Request, _: Reader) -> dict[str, Any]:
        schema: dict[str, Any] = request.app.openapi()
        return schema

    return docs
