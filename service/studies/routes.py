"""/v1/studies: submit a study, read it (and its learning curves), list, cancel. Wiring
only: the use cases are `service/studies/use_cases.py`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from pydantic import SkipValidation, ValidationError

from jobs.spec import StudySpec
from service.auth.callers import IdempotencyKey, Reader, Submitter
from service.deps import CancelDep, JobsDep, SettingsDep, StudiesDep, SubmissionDep
from service.platform.json_body import OffLoopJSONRoute
from service.studies import use_cases as ops
from service.studies.kept import KeptWork, StudyResume
from service.studies.plan import StudyPlan
from service.studies.resume import resume as resume_study
from service.studies.views import StudyOut, StudyPage, StudyRunRecord

router = APIRouter(prefix="/v1/studies", tags=["studies"])
SVG_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {"content": {"image/svg+xml": {"schema": {"type": "string"}}}}
}


@router.post(
    "",
    status_code=202,
    response_model=StudyOut,
    responses={200: {"model": StudyPlan, "description": "dry_run: the plan, nothing queued"}},
)
def create(
    spec: StudySpec,
    submission: SubmissionDep,
    studies: StudiesDep,
    who: Submitter,
    key: IdempotencyKey = None,
) -> Response:
    """Record a study and queue its jobs (and its tuned arms' sweeps); the study loop
    compares the arms once every run has ended. With `dry_run: true`, only its plan (200):
    the smallest effect detectable at 80 % power and the seeds and questions a target
    effect needs, from the spread in `power`; nothing is recorded or queued."""
    if spec.dry_run:
        found = ops.dry_run(submission, studies, spec, who)
        return Response(found.model_dump_json(), media_type="application/json")
    row, created = ops.submit(submission, studies, spec, who, key)
    return Response(
        ops.shown(studies, row).model_dump_json(),
        status_code=202,
        media_type="application/json",
        headers={} if created else {"Idempotent-Replayed": "true"},
    )


async def resume(
    body: Annotated[StudyResume, SkipValidation()],
    submission: SubmissionDep,
    studies: StudiesDep,
    who: Submitter,
    key: IdempotencyKey = None,
) -> Response:
    """Record a study that starts from its kept work (`GET /v1/studies/{id}/kept` of the
    service it ran on): each kept sweep and run the study would build is taken over as it
    ended, the rest is queued. A kept piece the study would not build is a 422 naming it."""
    # Kept work is up to NUMTUNE_MAX_KEPT_BYTES: parsing it takes ~0.5 s and validating it
    # seconds, and on the event loop either would hold every other client's request that
    # long. The route class parses it in a worker thread; it arrives here unvalidated and is
    # validated, and the study resumed, in a worker thread too.
    return await run_in_threadpool(resumed, body, submission, studies, who, key)


router.add_api_route(
    "/resume",
    resume,
    methods=["POST"],
    status_code=202,
    response_model=StudyOut,
    route_class_override=OffLoopJSONRoute,
)


def resumed(
    raw: Any, submission: SubmissionDep, studies: StudiesDep, who: Submitter, key: str | None
) -> Response:
    try:
        body = StudyResume.model_validate(raw)
    except ValidationError as error:
        raise RequestValidationError(error.errors()) from error
    row, created = resume_study(submission, studies, body, who, key)
    return Response(
        ops.shown(studies, row).model_dump_json(),
        status_code=202,
        media_type="application/json",
        headers={} if created else {"Idempotent-Replayed": "true"},
    )


@router.get("", response_model=StudyPage)
def list_all(
    studies: StudiesDep,
    who: Reader,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> StudyPage:
    """The caller's studies, newest first; pass `next_cursor` back as `cursor`."""
    rows, more = ops.listing(studies, who, limit, cursor)
    return StudyPage(items=[ops.shown(studies, r) for r in rows], next_cursor=more)


@router.get("/{study_id}", response_model=StudyOut)
def get_one(study_id: str, studies: StudiesDep, who: Reader) -> StudyOut:
    return ops.shown(studies, ops.owned(studies, study_id, who))


@router.get("/{study_id}/curves", response_class=Response, responses=SVG_RESPONSES)
def curves(study_id: str, studies: StudiesDep, jobs: JobsDep, who: Reader) -> Response:
    """Every arm's held-out primary metric over steps (mean over seeds), one SVG."""
    svg = ops.curves(studies, jobs, study_id, who)
    return Response(svg, media_type="image/svg+xml")


@router.get("/{study_id}/runs/{job_id}", response_model=StudyRunRecord)
def one_run(
    study_id: str, job_id: str, studies: StudiesDep, settings: SettingsDep, who: Reader
) -> dict[str, Any]:
    """One evaluation run as the study's result will name it (spec, provenance, final
    metrics, calibrated interval, per-question answers), as soon as it ended."""
    return ops.run_of(studies, settings.storage_root, study_id, job_id, who)


@router.get("/{study_id}/kept", response_model=KeptWork)
def kept(study_id: str, studies: StudiesDep, settings: SettingsDep, who: Reader) -> Response:
    """Every sweep and run of the study that has succeeded so far, with what its result
    reads of each (not their weights): what `POST /v1/studies/resume` takes."""
    found = ops.kept_work(studies, settings.storage_root, study_id, who)
    return Response(found.model_dump_json(), media_type="application/json")


@router.post("/{study_id}/cancel", status_code=202, response_model=StudyOut)
def cancel(study_id: str, studies: StudiesDep, canceller: CancelDep, who: Submitter) -> StudyOut:
    """Cancel the study and its queued and running jobs; an ended study is a 409."""
    return ops.shown(studies, ops.cancel(studies, canceller, study_id, who))
