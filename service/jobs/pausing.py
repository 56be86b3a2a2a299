"""The reconciler's side of pause and resume (the use cases are `service/jobs/pause.py`).

A pause asked of a submitted or running job reaches the run as `pause.request` in its run
folder (jobs/train/pause.py looks for it between steps; a sweep's trials look in the
sweep's folder, and the sweep ends once each has stopped: jobs/tune/pause.py, its
checkpoint then being the experiment state that Tune restores). The run then checkpoints, ends,
and writes result.json with status `paused`; the reconciler records that pause with its
checkpoint, sets that result aside (the resumed run writes its own) and removes the
request. A job the scheduler paused for a higher-priority one (service/queue/preempting.py) goes
back in the queue at once, with that checkpoint, and starts when resources free; one its
owner paused stays paused. Before any submission a request left over from an earlier
pause is removed, so that a resumed run does not stop again at its first step.
"""

from __future__ import annotations

import contextlib
import json
import logging
from datetime import UTC, datetime

from jobs.records.models import PAUSE_REQUEST, RESULT, RunResult
from jobs.records.run_files import RunFiles
from service.store import JobRow
from service.store.db import Database
from service.store.pauses import PauseStore

log = logging.getLogger(__name__)


def hand_over(storage: str, job: JobRow) -> None:
    """Make sure the run of a job asked to pause can see the request (each pass: a lost
    write, or a run that started after the request, still gets it)."""
    files = RunFiles.for_job(job.id, storage)
    if not files.has(PAUSE_REQUEST):
        asked = job.pause_requested_at or datetime.now(UTC)
        files.write_text(PAUSE_REQUEST, json.dumps({"requested_at": asked.isoformat()}))
        log.info("job %s: pause request handed to its run", job.id)


def clear_request(storage: str, job: JobRow) -> None:
    """Remove a request the job no longer has: only a resumed job can have one left, so
    other submissions touch no storage here."""
    if job.pause_requested_at is not None or not job.resumes:
        return
    files = RunFiles.for_job(job.id, storage)
    with contextlib.suppress(FileNotFoundError):
        files.fs.delete_file(f"{files.root}/{PAUSE_REQUEST}")


def record_paused(db: Database, storage: str, job: JobRow, result: RunResult) -> bool:
    """The run stopped at a step boundary: paused, with the checkpoint it resumes from."""
    files = RunFiles.for_job(job.id, storage)
    step = result.metrics.get("step")
    files.fs.move(f"{files.root}/{RESULT}", f"{files.root}/result-pause-{job.resumes + 1}.json")
    # A sweep (jobs/tune/pause.py) resumes from its experiment state, each trial from its
    # own checkpoint; its result says how many trials ended and paused.
    where = f"checkpoint at step {step}" if job.kind == "job" else result.detail
    detail = f"{where}: {result.best_checkpoint}"
    store = PauseStore(db)
    done = store.paused(job.id, job.status, result.best_checkpoint, detail[:2000])
    if done:
        if files.has(PAUSE_REQUEST):
            files.fs.delete_file(f"{files.root}/{PAUSE_REQUEST}")
        log.info("job %s paused at step %s", job.id, step)
        if store.preempted(job.id) and store.resume(job.id, "numtune"):
            log.info("job %s: preempted; back in the queue from its checkpoint", job.id)
    return done
