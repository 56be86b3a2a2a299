"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy.exc import SQLAlchemyError

from service.api.deps import Reader, ServicesDep
from service.observability import REGISTRY
from service.ray_backend import RayUnreachableError

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process answers (no token needed)."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(request: Request, services: ServicesDep, _: Reader) -> JSONResponse:
    """Ready when the database and Ray's Jobs API both answer and the reconciler keeps
    passing; 503 names what does not."""
    checks: dict[str, str] = {}
    try:
        services.db.ping()
        checks["database"] = "ok"
    except SQLAlchemyError as error:
        checks["database"] = f"error: {type(error).__name__}"
    try:
        services.backend.ping()
        checks["ray"] = "ok"
    except RayUnreachableError as error:
        checks["ray"] = f"error: {error}"[:300]
    reconciler = request.app.state.reconciler.health()
    if reconciler != "not started":  # an app built without one (tests, tools)
        checks["reconciler"] = reconciler
    ready = all(v == "ok" for v in checks.values())
    body = {"status": "ready" if ready else "not_ready", "checks": checks}
    return JSONResponse(body, 200 if ready else 503)


@router.get("/metrics", response_class=Response)
def metrics(_: Reader) -> Response:
    """Prometheus text format: requests, latencies, jobs by status, reconciler passes."""
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
