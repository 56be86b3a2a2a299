"""When a run goes back to the queue instead of failing, under one budget of start retries.

Two causes:
- its workers never started before step 1 (Ray Train's start-up timeout: the cluster was
  busier than admission counted);
- Ray lost it with its head (a restart of `numtune up`, a replaced cluster), and it wrote no
  result or one that says only that its workers died (`ended_by_its_result`). A sweep resumes
  from Tune's experiment state in its run folder (ended trials keep what they ended with,
  unfinished ones run again). A job goes on from its latest checkpoint, as a resumed pause
  does (Ray Train restores the same run name under the same run folder), or from step 0 if it
  had none; the metrics it wrote past that step are cut first, from `metrics.jsonl` and from
  the copied rows, since the run writes them again (jobs/records/restore.py).

Each attempt is a new Ray submission (`JobRow.ray_id` takes the retry count), so a head that
still knows the lost id cannot be confused with the new one.
"""

from __future__ import annotations

from pydantic import ValidationError

from jobs.records.models import RESULT, FailureCode, RunResult, TuneResult
from jobs.records.restore import cut_metrics, restore_step
from jobs.records.run_files import RunFiles
from service.jobs.states import JobReason
from service.store import JobRow, JobStore

LOST = "Ray has no record of this job: its head was replaced (a restart, a new cluster)"
# What a run's own result says when its workers died with the head and its driver outlived
# them long enough to write it (`numtune down` stops the head before the driver): the
# catch-all code for a dead worker, or a sweep stopped with trials pending.
GONE_WITH_THE_HEAD = (FailureCode.WORKER_FAILED, FailureCode.INTERRUPTED)


def ended_by_its_result(storage: str, job: JobRow) -> bool:
    """A lost run's result.json is its end, unless it says only that its workers died: with
    Ray's record of it gone too, they died with the head, and the run goes on. (One that
    failed so on its own just before the head went is retried, within the start retries.)"""
    files = RunFiles.for_job(job.id, storage)
    try:
        result = files.read_result(TuneResult if job.kind == "tune" else RunResult)
    except ValidationError:
        return True  # the reconciler ends it, saying what is wrong with the file
    if result is None:
        return False
    return not (result.status == "failed" and result.reason in GONE_WITH_THE_HEAD)


def start_timed_out(store: JobStore, job: JobRow, reason: JobReason | None) -> bool:
    """Its workers never started (Ray Train's start-up timeout) and it ran no step."""
    if reason != "insufficient_resources":
        return False
    now = store.get(job.id)  # its metrics were copied just now
    return now is not None and now.metrics_count == 0


def rewind(storage: str, job: JobRow, detail: str) -> tuple[int | None, str]:
    """Cut a job's `metrics.jsonl` back to the step it goes on from; return how many copied
    rows stay (None: a sweep, whose record Tune keeps) and `detail` saying from where.
    Raises OSError or ValueError when its checkpoint record cannot be read."""
    if job.kind == "tune":
        return None, detail
    files = RunFiles.for_job(job.id, storage)
    step = restore_step(files)
    kept = cut_metrics(files, step)
    if not step and not job.metrics_count:
        return 0, detail  # no step copied, none to repeat: nothing to say
    where = f"its checkpoint at step {step}" if step else "step 0 (it had no checkpoint yet)"
    return min(kept, job.metrics_count), f"{detail}; it goes on from {where}"


def set_result_aside(storage: str, job: JobRow, retry: int) -> None:
    """The attempt's result.json (if it wrote one) goes aside: the next writes its own."""
    files = RunFiles.for_job(job.id, storage)
    if files.has(RESULT):
        files.fs.move(f"{files.root}/{RESULT}", f"{files.root}/result-start-{retry}.json")
