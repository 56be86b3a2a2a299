"""Studies as one caller sees them: submit one, get it (and its learning curves), list
them, cancel one. A study's own machinery (its jobs, its loop, its result) is in
`service/studies/`; another owner's study reads as missing (404)."""

from __future__ import annotations

from typing import Any

from jobs.spec import JobSpec, StudySpec, TunedArm
from service.errors import Conflict, InvalidRequest, InvalidSpec, NotFound
from service.files.confinement import Problems
from service.jobs.cancel import Canceller
from service.jobs.submit import Submission
from service.jobs.use_cases import scope_of
from service.queue.ceilings import over_ceilings, over_study_totals
from service.settings import Settings
from service.store import IdempotencyConflictError, JobStore, Principal, StudyRow, StudyStore
from service.store.studies import STUDY_TERMINAL
from service.studies import kept, plan, result
from service.studies.expand import first_jobs
from service.studies.kept import KeptWork
from service.studies.plan import StudyPlan
from service.studies.progress import stop_jobs
from service.studies.views import StudyOut


def _study_problems(spec: StudySpec, settings: Settings) -> Problems:
    """The service's ceilings on the study as a whole and on each of its sweeps (the tuned
    arms', ce's learning-rate sweep)."""
    problems: Problems = []
    if spec.total_runs > settings.max_study_runs:
        message = (
            f"{spec.total_runs} runs ((arms + ce) × seeds); at most "
            f"{settings.max_study_runs} on this service"
        )
        problems.append({"field": "seeds", "message": message})
    problems += over_study_totals(spec, settings.ceilings)
    sweeps = [
        (f"arms[{i}]", spec.sweep_spec(label, arm))
        for i, (label, arm) in enumerate(zip(spec.labels(), spec.arms, strict=True))
        if isinstance(arm, TunedArm)
    ]
    if spec.tune_lr is not None:
        sweeps.append(("tune_lr", spec.lr_sweep_spec()))
    for where, sweep in sweeps:
        for problem in over_ceilings(sweep, settings.ceilings):
            problems.append({**problem, "field": f"{where}.{problem['field']}"})
    return problems


def checked_study(
    submission: Submission, spec: StudySpec, who: Principal, prefix: str = ""
) -> StudySpec:
    """The study as it is stored (its base checked as every submitted job is); a study
    with any problem is a 422 naming each (`prefix`: where the study sits in the body)."""
    base, problems = submission.checked(spec.base, who)
    problems = [{**p, "field": f"base.{p['field']}"} for p in problems]
    if not problems:  # a base no run of the study could ever start on this cluster
        problems = submission.never_fits(spec.base, "base.")
    problems += _study_problems(spec, submission.settings)
    if problems:
        raise InvalidSpec([{**p, "field": prefix + p["field"]} for p in problems])
    assert isinstance(base, JobSpec)  # checked() keeps the kind it is given
    return spec.model_copy(update={"base": base})


def submit(
    submission: Submission,
    studies: StudyStore,
    spec: StudySpec,
    who: Principal,
    key: str | None = None,
) -> tuple[StudyRow, bool]:
    """Check the study whole, then record it and all its first jobs (queued) at once; a
    study with any problem records nothing. (row, False) when `key` replays one."""
    stored = checked_study(submission, spec, who)
    try:
        return studies.create(
            name=spec.name, owner=who.owner, spec=stored, jobs=first_jobs(stored), key=key
        )
    except IdempotencyConflictError as error:
        raise Conflict(str(error)) from error


def dry_run(
    submission: Submission, studies: StudyStore, spec: StudySpec, who: Principal
) -> StudyPlan:
    """The study's plan (detectable effect, the seeds and questions a target needs), its
    base and the service's ceilings checked as a submit checks them; nothing is recorded
    or queued."""
    base, found = submission.checked(spec.base, who)
    problems = [{**p, "field": f"base.{p['field']}"} for p in found]
    if problems := problems + _study_problems(spec, submission.settings):
        raise InvalidSpec(problems)
    return plan.plan(spec.model_copy(update={"base": base}), studies, who)


def owned(studies: StudyStore, study_id: str, who: Principal) -> StudyRow:
    """The study if the caller may see it; else 404 (another owner's reads as missing)."""
    row = studies.get(study_id, scope_of(who))
    if row is None:
        raise NotFound(f"no study {study_id!r}")
    return row


def listing(
    studies: StudyStore, who: Principal, limit: int, cursor: str | None
) -> tuple[list[StudyRow], str | None]:
    """The caller's studies (an admin's: everyone's), newest first; a cursor that is not
    one of ours is a 422."""
    try:
        return studies.page(owner=scope_of(who), limit=limit, cursor=cursor)
    except ValueError as error:
        raise InvalidRequest([{"field": "cursor", "message": str(error)}]) from error


def shown(studies: StudyStore, row: StudyRow) -> StudyOut:
    """The study as the API and the dashboard show it, with its runs' states."""
    return StudyOut.of(row, studies.jobs_of(row))


def curves(studies: StudyStore, jobs: JobStore, study_id: str, who: Principal) -> str:
    """Every arm's held-out primary metric over steps (mean over seeds), one SVG."""
    row = owned(studies, study_id, who)
    return result.curves_file(row.spec, row, jobs)


def run_of(
    studies: StudyStore, storage: str, study_id: str, job_id: str, who: Principal
) -> dict[str, Any]:
    """One evaluation run of the caller's study, with its per-question answers once it
    succeeded; 404 for a job that is not one of the study's runs."""
    row = owned(studies, study_id, who)
    found = result.one_run(row, studies.jobs_of(row), storage, job_id)
    if found is None:
        raise NotFound(f"study {study_id} has no run {job_id!r}")
    return found


def kept_work(studies: StudyStore, storage: str, study_id: str, who: Principal) -> KeptWork:
    """The study's succeeded sweeps and runs as another service resumes it from them."""
    row = owned(studies, study_id, who)
    return kept.export(row, studies.jobs_of(row), storage)


def cancel(studies: StudyStore, canceller: Canceller, study_id: str, who: Principal) -> StudyRow:
    """Mark the study `cancelling` (no more jobs are added to it), cancel its queued and
    running jobs, then mark it `cancelled`; an ended study is a 409."""
    row = owned(studies, study_id, who)
    if row.status in STUDY_TERMINAL:
        raise Conflict(f"study {study_id} already {row.status}")
    if row.status == "running" and not studies.transition(
        row.id, "running", "cancelling", detail=f"by {who.owner}"
    ):
        row = owned(studies, study_id, who)  # it ended meanwhile, or another cancel won
        if row.status in STUDY_TERMINAL:
            raise Conflict(f"study {study_id} already {row.status}")
    if stop_jobs(studies, canceller, row, who.owner):
        studies.transition(row.id, "cancelling", "cancelled")
    return owned(studies, study_id, who)
