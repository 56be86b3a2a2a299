"""/v1/jobs and /v1/tunes: one router shape for both kinds (they share the state machine).

A POST only validates and records the job (status `queued`); the reconciler submits it
to Ray. So a request is answered in milliseconds, and a job the API accepted survives
an API crash the moment the row is committed. The routes are wiring: parse, call the use
case (`service/jobs/use_cases.py`, `service/jobs/submit.py`), shape the response.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.routing import APIRoute

from jobs.spec import JobSpec, TuneSpec
from service.auth.access import admit
from service.auth.callers import Credentials, IdempotencyKey, Reader, Submitter
from service.deps import CancelDep, GateDep, JobsDep, SettingsDep, SubmissionDep
from service.errors import APIError
from service.jobs import pause as pausing
from service.jobs import use_cases as ops
from service.jobs.logstream import StreamSlots, follow_log, whole_log
from service.jobs.run_storage import RunStorage
from service.jobs.schemas import JobEventOut, JobEventsOut, JobOut, JobPage, MetricsOut, TrialsOut
from service.jobs.states import JobStatus
from service.store import JobRow

Kind = Literal["job", "tune"]


async def route_kind(request: Request) -> Kind:
    """Which router matched, /v1/jobs or /v1/tunes: both serve the same route functions."""
    route: APIRoute = request.scope["route"]
    return "tune" if route.path.startswith("/v1/tunes") else "job"


KindDep = Annotated[Kind, Depends(route_kind)]


def accepted(row: JobRow, created: bool) -> Response:
    """202 with the job; a replayed Idempotency-Key says so. Serialised once here (FastAPI
    would validate it again against response_model)."""
    return Response(
        JobOut.of(row).model_dump_json(),
        status_code=202,
        media_type="application/json",
        headers={} if created else {"Idempotent-Replayed": "true"},
    )


def submit_job(
    spec: JobSpec, submission: SubmissionDep, who: Submitter, key: IdempotencyKey = None
) -> Response:
    """Record a training job; the reconciler submits it to Ray."""
    return accepted(*submission.record(spec, "job", who, key))


def submit_tune(
    spec: TuneSpec, submission: SubmissionDep, who: Submitter, key: IdempotencyKey = None
) -> Response:
    """Record a Ray Tune sweep; the reconciler submits it to Ray."""
    return accepted(*submission.record(spec, "tune", who, key))


def trials(job_id: str, jobs: JobsDep, who: Reader) -> TrialsOut:
    """The trials table (config, status, best metric, checkpoint) as last copied."""
    row = ops.owned(jobs, job_id, "tune", who)
    return TrialsOut(id=row.id, items=row.trials or [])


def list_all(
    jobs: JobsDep,
    who: Reader,
    kind: KindDep,
    status: JobStatus | None = None,
    name: Annotated[str | None, Query(max_length=63)] = None,
    owner: Annotated[str | None, Query(max_length=63)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> JobPage:
    """Newest first; pass `next_cursor` back as `cursor` for the next page."""
    rows, more = ops.listing(
        jobs, who, kind=kind, owner=owner, status=status, name=name, limit=limit, cursor=cursor
    )
    return JobPage(items=[JobOut.of(r) for r in rows], next_cursor=more)


def get_one(job_id: str, jobs: JobsDep, who: Reader, kind: KindDep) -> Response:
    # The hottest read: serialise once here rather than have FastAPI validate the
    # model again against response_model (which still documents it).
    out = JobOut.of(ops.owned(jobs, job_id, kind, who))
    return Response(out.model_dump_json(), media_type="application/json")


def metrics(job_id: str, jobs: JobsDep, who: Reader, kind: KindDep) -> MetricsOut:
    """Every reported row (step, loss parts, eval metrics) copied so far."""
    row = ops.owned(jobs, job_id, kind, who)
    return MetricsOut(id=row.id, items=jobs.metrics(row.id))


def logs(
    job_id: str,
    request: Request,
    jobs: JobsDep,
    gate: GateDep,
    settings: SettingsDep,
    who: Reader,
    kind: KindDep,
    credentials: Credentials,
    follow: bool = False,
) -> Any:
    """The whole log; with follow=true, server-sent events until the job ends."""
    row = ops.owned(jobs, job_id, kind, who)
    if not follow:
        return StreamingResponse(whole_log(jobs, row.id), media_type="text/plain")
    slots: StreamSlots = request.app.state.log_streams
    slot = slots.take(who.owner)

    async def allowed() -> bool:
        try:
            await admit(gate, credentials, "read")
        except APIError:
            return False
        return True

    return StreamingResponse(
        follow_log(
            jobs,
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


def cancel(
    job_id: str, jobs: JobsDep, canceller: CancelDep, who: Submitter, kind: KindDep
) -> JobOut:
    """Cancel from queued, submitted or running; a finished job is a 409 (also one
    that Ray saw finish before this service recorded it: its real outcome is kept), and
    so is a job that kept changing state under every attempt to cancel it."""
    return JobOut.of(ops.cancel(canceller, ops.owned(jobs, job_id, kind, who), who))


def pause(job_id: str, jobs: JobsDep, who: Submitter, kind: KindDep) -> JobOut:
    """Pause: a queued job is held until resumed; a running one checkpoints at its next
    step boundary, gives back its Ray resources and reads `paused` (until then it is
    `running` with `pause_requested_at`). A sweep pauses every running trial so, and
    resuming restores it: finished trials are not run again. Pausing a paused job answers
    it as it is; an ended one is a 409."""
    return JobOut.of(pausing.pause(jobs, job_id, who, kind))


def resume(job_id: str, jobs: JobsDep, who: Submitter, kind: KindDep) -> JobOut:
    """Resume a paused job: back in the queue, it continues from its checkpoint (a sweep:
    each trial from its own). A queued or running job is answered as it is; one still
    pausing or one that ended is a 409."""
    return JobOut.of(pausing.resume(jobs, job_id, who, kind))


def events(job_id: str, jobs: JobsDep, who: Reader, kind: KindDep) -> JobEventsOut:
    """Every pause asked for, pause done and resume, oldest first, with who asked."""
    items = [JobEventOut.model_validate(e) for e in pausing.events(jobs, job_id, who, kind)]
    return JobEventsOut(id=job_id, items=items)


def remove(
    job_id: str, jobs: JobsDep, who: Submitter, kind: KindDep, settings: SettingsDep
) -> Response:
    """Forget a finished job (its record, metrics and logs, and its run folder unless a
    study names it); running ones are a 409."""
    ops.remove(jobs, job_id, kind, who, RunStorage(settings.storage_root, jobs.db))
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
    router.post("/{job_id}/pause", response_model=JobOut)(pause)
    router.post("/{job_id}/resume", response_model=JobOut)(resume)
    router.get("/{job_id}/events", response_model=JobEventsOut)(events)
    router.delete("/{job_id}", status_code=204)(remove)
    return router
