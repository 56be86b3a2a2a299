"""/v1/jobs and /v1/tunes: one router shape for both kinds (they share the state machine).

A POST only validates and records the job (status `queued`); the reconciler submits it
to Ray. So a request is answered in milliseconds, and a job the API accepted survives
an API crash the moment the row is committed. The routes are wiring: cancellation's
logic is `service/cancel.py`, the queries are the store's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials

from jobs.spec import JobSpec, TuneSpec
from service import cancel as cancelling
from service.api.deps import Reader, Services, ServicesDep, Submitter, bearer
from service.auth import admit
from service.errors import (
    APIError,
    Conflict,
    Forbidden,
    InvalidRequest,
    InvalidSpec,
    NotFound,
    RayUnavailable,
)
from service.logstream import StreamSlots, follow_log, whole_log
from service.ray_backend import RayUnreachableError
from service.reconciler import Reconciler
from service.schemas import JobOut, JobPage, MetricsOut, TrialsOut
from service.states import TERMINAL, JobStatus
from service.store import IdempotencyConflictError, JobRow, Principal
from service.store.jobs import JobStore
from service.submission import checked

Kind = Literal["job", "tune"]
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)]


async def route_kind(request: Request) -> Kind:
    """Which router matched, /v1/jobs or /v1/tunes: both serve the same route functions."""
    route: APIRoute = request.scope["route"]
    return "tune" if route.path.startswith("/v1/tunes") else "job"


KindDep = Annotated[Kind, Depends(route_kind)]


def owned(store: JobStore, job_id: str, kind: str, who: Principal) -> JobRow:
    """The job if it exists, is of this kind and the caller may see it; else 404."""
    row = store.get(job_id, None if who.is_admin else who.owner)
    if row is None or row.kind != kind:
        raise NotFound(f"no {kind} {job_id!r}")
    return row


def record(
    spec: JobSpec | TuneSpec,
    kind: Kind,
    services: Services,
    who: Principal,
    key: str | None,
    meta: dict[str, Any] | None = None,
) -> tuple[JobRow, bool]:
    """Confine, check and store a job (queued); (row, False) when `key` replays one."""
    # Files and models the job would read: confined to the roots and the caller's models.
    spec, problems = checked(spec, services, who)
    if problems:
        raise InvalidSpec(problems)
    try:
        return services.jobs.create(
            kind=kind,
            name=spec.name,
            owner=who.owner,
            spec=spec,
            idempotency_key=key,
            meta=meta,
        )
    except IdempotencyConflictError as error:
        raise Conflict(str(error)) from error


def create(
    spec: JobSpec | TuneSpec, kind: Kind, services: ServicesDep, who: Principal, key: str | None
) -> Response:
    row, created = record(spec, kind, services, who, key)
    # Serialised once here (FastAPI would validate it again against response_model).
    return Response(
        JobOut.of(row).model_dump_json(),
        status_code=202,
        media_type="application/json",
        headers={} if created else {"Idempotent-Replayed": "true"},
    )


def submit_job(
    spec: JobSpec, services: ServicesDep, who: Submitter, key: IdempotencyKey = None
) -> Response:
    """Record a training job; the reconciler submits it to Ray."""
    return create(spec, "job", services, who, key)


def submit_tune(
    spec: TuneSpec, services: ServicesDep, who: Submitter, key: IdempotencyKey = None
) -> Response:
    """Record a Ray Tune sweep; the reconciler submits it to Ray."""
    return create(spec, "tune", services, who, key)


def trials(job_id: str, services: ServicesDep, who: Reader) -> TrialsOut:
    """The trials table (config, status, best metric, checkpoint) as last copied."""
    row = owned(services.jobs, job_id, "tune", who)
    return TrialsOut(id=row.id, items=row.trials or [])


def list_all(
    services: ServicesDep,
    who: Reader,
    kind: KindDep,
    status: JobStatus | None = None,
    name: Annotated[str | None, Query(max_length=63)] = None,
    owner: Annotated[str | None, Query(max_length=63)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> JobPage:
    """Newest first; pass `next_cursor` back as `cursor` for the next page."""
    if owner is not None and owner != who.owner and not who.is_admin:
        raise Forbidden("only admin tokens may list other owners' jobs")
    scope = owner if (owner is not None or who.is_admin) else who.owner
    try:
        rows, more = services.jobs.page(
            kind=kind, owner=scope, status=status, name=name, limit=limit, cursor=cursor
        )
    except ValueError as error:
        raise InvalidRequest([{"field": "cursor", "message": str(error)}]) from error
    return JobPage(items=[JobOut.of(r) for r in rows], next_cursor=more)


def get_one(job_id: str, services: ServicesDep, who: Reader, kind: KindDep) -> Response:
    # The hottest read: serialise once here rather than have FastAPI validate the
    # model again against response_model (which still documents it).
    out = JobOut.of(owned(services.jobs, job_id, kind, who))
    return Response(out.model_dump_json(), media_type="application/json")


def metrics(job_id: str, services: ServicesDep, who: Reader, kind: KindDep) -> MetricsOut:
    """Every reported row (step, loss parts, eval metrics) copied so far."""
    row = owned(services.jobs, job_id, kind, who)
    return MetricsOut(id=row.id, items=services.jobs.metrics(row.id))


def logs(
    job_id: str,
    request: Request,
    services: ServicesDep,
    who: Reader,
    kind: KindDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    follow: bool = False,
) -> Any:
    """The whole log; with follow=true, server-sent events until the job ends."""
    row = owned(services.jobs, job_id, kind, who)
    if not follow:
        return StreamingResponse(whole_log(services.jobs, row.id), media_type="text/plain")
    slots: StreamSlots = request.app.state.log_streams
    slot = slots.take(who.owner)

    async def allowed() -> bool:
        try:
            await admit(services.gate, credentials, "read")
        except APIError:
            return False
        return True

    settings = services.settings
    return StreamingResponse(
        follow_log(
            services.jobs,
            row.id,
            settings.reconcile_interval_s,
            allowed=allowed,
            recheck_s=settings.log_stream_recheck_s,
            max_s=settings.log_stream_max_s,
            on_close=slot.release,
        ),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache"},
    )


def cancel_row(row: JobRow, request: Request, services: Services, who: Principal) -> JobRow:
    """Cancel `row` for `who`; the API's error for each way that can fail."""
    reconciler: Reconciler = request.app.state.reconciler
    try:
        return cancelling.cancel(services.jobs, services.backend, row, who.owner, reconciler.follow)
    except (cancelling.AlreadyEndedError, cancelling.CancelContendedError) as error:
        raise Conflict(str(error)) from error
    except cancelling.JobGoneError as error:
        raise NotFound(str(error)) from error
    except RayUnreachableError as error:
        raise RayUnavailable(f"could not reach Ray to stop {row.id}: {error}") from error


def cancel(
    job_id: str, request: Request, services: ServicesDep, who: Submitter, kind: KindDep
) -> JobOut:
    """Cancel from queued, submitted or running; a finished job is a 409 (also one
    that Ray saw finish before this service recorded it: its real outcome is kept), and
    so is a job that kept changing state under every attempt to cancel it."""
    row = owned(services.jobs, job_id, kind, who)
    return JobOut.of(cancel_row(row, request, services, who))


def remove(job_id: str, services: ServicesDep, who: Submitter, kind: KindDep) -> Response:
    """Forget a finished job (its record, metrics and logs); running ones are a 409."""
    row = owned(services.jobs, job_id, kind, who)
    if row.status not in TERMINAL or not services.jobs.delete_terminal(row.id):
        raise Conflict(f"{kind} {job_id} is {row.status}; cancel it first")
    return Response(status_code=204)


# Not PlainTextResponse: FastAPI documents a route's error models under its response
# class's media type, and our errors are JSON.
LOG_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {
            "text/plain": {"schema": {"type": "string"}},
            "text/event-stream": {"schema": {"type": "string"}},
        }
    }
}


def make_router(kind: Kind) -> APIRouter:
    """The routes of one kind, in the order the API documents them."""
    plural = f"{kind}s"
    router = APIRouter(prefix=f"/v1/{plural}", tags=[plural])
    submit = submit_tune if kind == "tune" else submit_job
    router.post("", status_code=202, response_model=JobOut)(submit)
    if kind == "tune":
        router.get("/{job_id}/trials", response_model=TrialsOut)(trials)
    router.get("", response_model=JobPage)(list_all)
    router.get("/{job_id}", response_model=JobOut)(get_one)
    router.get("/{job_id}/metrics", response_model=MetricsOut)(metrics)
    router.get("/{job_id}/logs", response_class=Response, responses=LOG_RESPONSES)(logs)
    router.post("/{job_id}/cancel", status_code=202, response_model=JobOut)(cancel)
    router.delete("/{job_id}", status_code=204)(remove)
    return router
