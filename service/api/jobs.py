"""/v1/jobs and /v1/tunes: one router shape for both kinds (they share the state machine).

A POST only validates and records the job (status `queued`); the reconciler submits it
to Ray. So a request is answered in milliseconds, and a job the API accepted survives
an API crash the moment the row is committed.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials

from jobs.spec import JobSpec, TuneSpec
from service.admission import over_ceilings
from service.api.deps import Reader, Services, ServicesDep, Submitter, bearer
from service.auth import admit
from service.confinement import confine
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
from service.ray_backend import TERMINAL_RAY, RayJobMissingError, RayUnreachableError
from service.reconciler import Reconciler
from service.schemas import JobOut, JobPage, MetricsOut, TrialsOut
from service.states import TERMINAL, JobStatus
from service.store import IdempotencyConflictError, JobRow, Principal
from service.store.jobs import JobStore

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)]


def finished_in_ray(services: Services, job_id: str) -> bool:
    """Ray reports the job succeeded or failed by itself (not stopped by us)."""
    try:
        status = services.backend.info(job_id).status
    except RayJobMissingError:
        return False
    return status in TERMINAL_RAY - {"STOPPED"}


def owned(store: JobStore, job_id: str, kind: str, who: Principal) -> JobRow:
    """The job if it exists, is of this kind and the caller may see it; else 404."""
    row = store.get(job_id, None if who.is_admin else who.owner)
    if row is None or row.kind != kind:
        raise NotFound(f"no {kind} {job_id!r}")
    return row


def make_router(kind: str) -> APIRouter:
    plural = f"{kind}s"
    router = APIRouter(prefix=f"/v1/{plural}", tags=[plural])

    def create(
        spec: JobSpec | TuneSpec, services: ServicesDep, who: Principal, key: str | None
    ) -> Response:
        # Files and models the job would read: confined to the roots and the caller's models.
        spec, problems = confine(spec, services.settings, services.registry, who)
        settings = services.settings
        problems += over_ceilings(
            spec,
            max_steps=settings.max_steps,
            max_trials=settings.max_trials,
            max_timeout_s=settings.max_timeout_s,
        )
        if problems:
            raise InvalidSpec(problems)
        try:
            row, created = services.jobs.create(
                kind=kind,
                name=spec.name,
                owner=who.owner,
                spec=spec.model_dump(mode="json"),
                idempotency_key=key,
            )
        except IdempotencyConflictError as error:
            raise Conflict(str(error)) from error
        # Serialised once here (FastAPI would validate it again against response_model).
        return Response(
            JobOut.of(row).model_dump_json(),
            status_code=202,
            media_type="application/json",
            headers={} if created else {"Idempotent-Replayed": "true"},
        )

    if kind == "tune":

        @router.post("", status_code=202, response_model=JobOut)
        def submit_tune(
            spec: TuneSpec,
            services: ServicesDep,
            who: Submitter,
            key: IdempotencyKey = None,
        ) -> Response:
            """Record a Ray Tune sweep; the reconciler submits it to Ray."""
            return create(spec, services, who, key)

        @router.get("/{job_id}/trials", response_model=TrialsOut)
        def trials(job_id: str, services: ServicesDep, who: Reader) -> TrialsOut:
            """The trials table (config, status, best metric, checkpoint) as last copied."""
            row = owned(services.jobs, job_id, kind, who)
            return TrialsOut(id=row.id, items=row.trials or [])

    else:

        @router.post("", status_code=202, response_model=JobOut)
        def submit_job(
            spec: JobSpec,
            services: ServicesDep,
            who: Submitter,
            key: IdempotencyKey = None,
        ) -> Response:
            """Record a training job; the reconciler submits it to Ray."""
            return create(spec, services, who, key)

    @router.get("", response_model=JobPage)
    def list_all(
        services: ServicesDep,
        who: Reader,
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

    @router.get("/{job_id}", response_model=JobOut)
    def get_one(job_id: str, services: ServicesDep, who: Reader) -> Response:
        # The hottest read: serialise once here rather than have FastAPI validate the
        # model again against response_model (which still documents it).
        out = JobOut.of(owned(services.jobs, job_id, kind, who))
        return Response(out.model_dump_json(), media_type="application/json")

    @router.get("/{job_id}/metrics", response_model=MetricsOut)
    def metrics(job_id: str, services: ServicesDep, who: Reader) -> MetricsOut:
        """Every reported row (step, loss parts, eval metrics) copied so far."""
        row = owned(services.jobs, job_id, kind, who)
        return MetricsOut(id=row.id, items=services.jobs.metrics(row.id))

    @router.get(
        "/{job_id}/logs",
        # Not PlainTextResponse: FastAPI documents a route's error models under its
        # response class's media type, and our errors are JSON.
        response_class=Response,
        responses={
            200: {
                "content": {
                    "text/plain": {"schema": {"type": "string"}},
                    "text/event-stream": {"schema": {"type": "string"}},
                }
            }
        },
    )
    def logs(
        job_id: str,
        request: Request,
        services: ServicesDep,
        who: Reader,
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

    @router.post("/{job_id}/cancel", status_code=202, response_model=JobOut)
    def cancel(job_id: str, request: Request, services: ServicesDep, who: Submitter) -> JobOut:
        """Cancel from queued, submitted or running; a finished job is a 409 (also one
        that Ray saw finish before this service recorded it: its real outcome is kept)."""
        reconciler: Reconciler = request.app.state.reconciler
        row = owned(services.jobs, job_id, kind, who)
        for _ in range(5):  # compare-and-set against the reconciler moving it on
            if row.status in TERMINAL:
                raise Conflict(f"{kind} {job_id} already {row.status}")
            if row.status != "queued":
                try:
                    if finished_in_ray(services, row.id):
                        reconciler.follow(row)  # records the outcome Ray reported
                        row = owned(services.jobs, job_id, kind, who)
                        continue
                    services.backend.stop(row.id)
                    # Ray may have finished it between our look and the stop.
                    if finished_in_ray(services, row.id):
                        continue
                except RayUnreachableError as error:
                    raise RayUnavailable(
                        f"could not reach Ray to stop {job_id}: {error}"
                    ) from error
            if services.jobs.transition(
                row.id, row.status, "cancelled", reason="cancelled", detail=f"by {who.owner}"
            ):
                break
            row = owned(services.jobs, job_id, kind, who)
        return JobOut.of(owned(services.jobs, job_id, kind, who))

    @router.delete("/{job_id}", status_code=204)
    def remove(job_id: str, services: ServicesDep, who: Submitter) -> Response:
        """Forget a finished job (its record, metrics and logs); running ones are a 409."""
        row = owned(services.jobs, job_id, kind, who)
        if row.status not in TERMINAL or not services.jobs.delete_terminal(row.id):
            raise Conflict(f"{kind} {job_id} is {row.status}; cancel it first")
        return Response(status_code=204)

    return router
