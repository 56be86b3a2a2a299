"""The use cases a caller starts: submit a study, get it, list them, cancel one."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from jobs.spec import BASELINE, JobSpec, LossSpec, StudySpec, TunedArm, TuneSpec
from service import cancel as cancelling
from service.api.deps import Services
from service.ceilings import over_ceilings
from service.confinement import Problems
from service.errors import Conflict, InvalidSpec, NotFound
from service.ray_backend import RayUnreachableError
from service.states import TERMINAL
from service.store import IdempotencyConflictError, JobRow, Principal, StudyRow, StudyStore
from service.store.studies import STUDY_TERMINAL
from service.submission import checked

log = logging.getLogger(__name__)
# (the study's entry for the job, kind, job name, spec as stored): what the store inserts.
NewJob = tuple[dict[str, Any], str, str, JobSpec | TuneSpec]
RecordEnd = Callable[[JobRow], object]  # the reconciler's follow: records an end Ray saw


def run_job(spec: StudySpec, label: str, loss: LossSpec, seed: int) -> NewJob:
    job = spec.run_spec(label, loss, seed)
    return {"arm": label, "seed": seed}, "job", job.name, job


def first_jobs(spec: StudySpec) -> list[NewJob]:
    """The sweeps of the tuned arms (they gate those arms' runs, so they queue first), then
    ce and every fixed arm on each seed, seed by seed (paired runs finish close together)."""
    jobs: list[NewJob] = []
    fixed: list[tuple[str, LossSpec]] = [(BASELINE, LossSpec(name="ce"))]
    for label, arm in zip(spec.labels(), spec.arms, strict=True):
        if isinstance(arm, TunedArm):
            sweep = spec.sweep_spec(label, arm)
            jobs.append(({"arm": label, "seed": None}, "tune", sweep.name, sweep))
        else:
            fixed.append((label, arm))
    for seed in spec.seeds:
        jobs += [run_job(spec, label, loss, seed) for label, loss in fixed]
    return jobs


def _study_problems(spec: StudySpec, services: Services) -> Problems:
    """The service's ceilings on the study as a whole and on each tuned arm's sweep."""
    settings = services.settings
    problems: Problems = []
    if spec.total_runs > settings.max_study_runs:
        message = (
            f"{spec.total_runs} runs ((arms + ce) × seeds); at most "
            f"{settings.max_study_runs} on this service"
        )
        problems.append({"field": "seeds", "message": message})
    for i, (label, arm) in enumerate(zip(spec.labels(), spec.arms, strict=True)):
        if isinstance(arm, TunedArm):
            sweep = spec.sweep_spec(label, arm)
            for problem in over_ceilings(sweep, settings.ceilings):
                problems.append({**problem, "field": f"arms[{i}].{problem['field']}"})
    return problems


def submit(
    spec: StudySpec, services: Services, who: Principal, key: str | None = None
) -> tuple[StudyRow, bool]:
    """Check the study whole, then record it and all its first jobs (queued) at once; a
    study with any problem records nothing. (row, False) when `key` replays one."""
    base, problems = checked(spec.base, services, who)
    problems = [{**p, "field": f"base.{p['field']}"} for p in problems]
    problems += _study_problems(spec, services)
    if problems:
        raise InvalidSpec(problems)
    assert isinstance(base, JobSpec)  # checked() keeps the kind it is given
    stored = spec.model_copy(update={"base": base})
    try:
        return StudyStore(services.db).create(
            name=spec.name,
            owner=who.owner,
            spec=stored,
            jobs=first_jobs(stored),
            key=key,
        )
    except IdempotencyConflictError as error:
        raise Conflict(str(error)) from error


def owned(services: Services, study_id: str, who: Principal) -> StudyRow:
    """The study if the caller may see it; else 404 (another owner's reads as missing)."""
    row = StudyStore(services.db).get(study_id, None if who.is_admin else who.owner)
    if row is None:
        raise NotFound(f"no study {study_id!r}")
    return row


def listing(
    services: Services, who: Principal, limit: int, cursor: str | None
) -> tuple[list[StudyRow], str | None]:
    """The caller's studies (an admin's: everyone's), newest first."""
    owner = None if who.is_admin else who.owner
    return StudyStore(services.db).page(owner=owner, limit=limit, cursor=cursor)


def stop_jobs(services: Services, study: StudyRow, by: str, record_end: RecordEnd) -> bool:
    """Cancel every job of the study that has not ended; False when one could not be
    stopped now (Ray unreachable, contended): the study loop tries again."""
    done = True
    for job in StudyStore(services.db).jobs_of(study).values():
        if job.status in TERMINAL:
            continue
        try:
            cancelling.cancel(services.jobs, services.backend, job, by, record_end)
        except (cancelling.AlreadyEndedError, cancelling.JobGoneError):
            continue  # it ended by itself: nothing to stop
        except (cancelling.CancelContendedError, RayUnreachableError) as error:
            log.warning("study %s: could not cancel %s yet: %s", study.id, job.id, error)
            done = False
    return done


def cancel(services: Services, who: Principal, study_id: str, record_end: RecordEnd) -> StudyRow:
    """Mark the study `cancelling` (no more jobs are added to it), cancel its queued and
    running jobs, then mark it `cancelled`; an ended study is a 409."""
    store = StudyStore(services.db)
    row = owned(services, study_id, who)
    if row.status in STUDY_TERMINAL:
        raise Conflict(f"study {study_id} already {row.status}")
    if row.status == "running" and not store.transition(
        row.id, "running", "cancelling", detail=f"by {who.owner}"
    ):
        row = owned(services, study_id, who)  # it ended meanwhile, or another cancel won
        if row.status in STUDY_TERMINAL:
            raise Conflict(f"study {study_id} already {row.status}")
    if stop_jobs(services, row, who.owner, record_end):
        store.transition(row.id, "cancelling", "cancelled")
    return owned(services, study_id, who)
