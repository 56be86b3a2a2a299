"""/v1/studies: submit a study, read it (and its learning curves), list, cancel. Wiring
only: the use cases are `service/studies/`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from jobs.spec import StudySpec
from service.api.deps import Reader, ServicesDep, Submitter
from service.api.jobs import IdempotencyKey
from service.errors import InvalidRequest
from service.reconciler import Reconciler
from service.store import StudyRow, StudyStore
from service.studies import result, submit
from service.studies.views import StudyOut, StudyPage

router = APIRouter(prefix="/v1/studies", tags=["studies"])
SVG_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {"content": {"image/svg+xml": {"schema": {"type": "string"}}}}
}


def shown(services: ServicesDep, row: StudyRow) -> StudyOut:
    return StudyOut.of(row, StudyStore(services.db).jobs_of(row))


@router.post("", status_code=202, response_model=StudyOut)
def create(
    spec: StudySpec, services: ServicesDep, who: Submitter, key: IdempotencyKey = None
) -> Response:
    """Record a study and queue its jobs (and its tuned arms' sweeps); the study loop
    compares the arms once every run has ended."""
    row, created = submit.submit(spec, services, who, key)
    return Response(
        shown(services, row).model_dump_json(),
        status_code=202,
        media_type="application/json",
        headers={} if created else {"Idempotent-Replayed": "true"},
    )


@router.get("", response_model=StudyPage)
def list_all(
    services: ServicesDep,
    who: Reader,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> StudyPage:
    """The caller's studies, newest first; pass `next_cursor` back as `cursor`."""
    try:
        rows, more = submit.listing(services, who, limit, cursor)
    except ValueError as error:
        raise InvalidRequest([{"field": "cursor", "message": str(error)}]) from error
    return StudyPage(items=[shown(services, r) for r in rows], next_cursor=more)


@router.get("/{study_id}", response_model=StudyOut)
def get_one(study_id: str, services: ServicesDep, who: Reader) -> StudyOut:
    return shown(services, submit.owned(services, study_id, who))


@router.get("/{study_id}/curves", response_class=Response, responses=SVG_RESPONSES)
def curves(study_id: str, services: ServicesDep, who: Reader) -> Response:
    """Every arm's held-out primary metric over steps (mean over seeds), one SVG."""
    row = submit.owned(services, study_id, who)
    return Response(result.curves_file(row.spec, row, services.jobs), media_type="image/svg+xml")


@router.post("/{study_id}/cancel", status_code=202, response_model=StudyOut)
def cancel(study_id: str, request: Request, services: ServicesDep, who: Submitter) -> StudyOut:
    """Cancel the study and its queued and running jobs; an ended study is a 409."""
    reconciler: Reconciler = request.app.state.reconciler
    row = submit.cancel(services, who, study_id, reconciler.follow)
    return shown(services, row)
