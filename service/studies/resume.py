"""Resume a study from its kept work on this service (service/studies/adopt.py says which
jobs are taken over): check the study as a submit does, check every kept piece against the
job the study builds, write the adopted jobs' files, then record the study with all its
jobs at once. Any problem records nothing and leaves no file behind."""

from __future__ import annotations

from typing import Any

from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec, TuneSpec
from service.errors import Conflict, InvalidSpec
from service.jobs.submit import Submission
from service.store import IdempotencyConflictError, Principal, StudyRow, StudyStore
from service.store.job_rows import new_job_id
from service.store.studies import EndedJob
from service.studies.adopt import adopted, plan
from service.studies.kept import StudyResume
from service.studies.use_cases import checked_study


def resume(
    submission: Submission,
    studies: StudyStore,
    body: StudyResume,
    who: Principal,
    key: str | None = None,
) -> tuple[StudyRow, bool]:
    """(row, False) when `key` replays a study: then nothing of this body is written."""
    if body.spec.dry_run:
        message = "a resumed study is recorded and run: plan one with POST /v1/studies"
        raise InvalidSpec([{"field": "spec.dry_run", "message": message}])
    stored = checked_study(submission, body.spec, who, prefix="spec.")

    def checked(spec: JobSpec | TuneSpec) -> dict[str, Any]:
        found, problems = submission.checked(spec, who)
        return (spec if problems else found).model_dump(mode="json")

    planned, problems = plan(stored, body.kept, checked)
    if problems:
        raise InvalidSpec(problems)
    storage = submission.settings.storage_root
    ended: dict[int, EndedJob] = {}
    written: list[str] = []  # each adopted job's folder, before its first file
    try:
        for i, job in enumerate(planned):
            if job.piece is not None:
                written.append(new_job_id(job.job[1]))
                ended[i] = adopted(storage, written[-1], job.piece)
        row, created = studies.create(
            name=stored.name,
            owner=who.owner,
            spec=stored,
            jobs=[p.job for p in planned],
            key=key,
            ended=ended,
        )
    except IdempotencyConflictError as error:
        _forget(storage, written)
        raise Conflict(str(error)) from error
    except BaseException:
        _forget(storage, written)
        raise
    if not created:  # a replay: the study recorded the first time keeps its own files
        _forget(storage, written)
    return row, created


def _forget(storage: str, written: list[str]) -> None:
    for job_id in written:
        files = RunFiles.for_job(job_id, storage)
        files.fs.delete_dir(files.root)
