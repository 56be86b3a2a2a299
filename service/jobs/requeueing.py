"""When a run goes back to the queue instead of failing, under one budget of start retries.

Two causes:
- its workers never started before step 1 (Ray Train's start-up timeout: the cluster was
  busier than admission counted);
- Ray lost it with its head (a restart of `numtune up`, a replaced cluster) while it can go
  on: a sweep resumes from Tune's experiment state in its run folder (ended trials keep what
  they ended with, unfinished ones run again), and a job that has run no step has nothing to
  repeat. A job part-way through would repeat its steps and its copied metrics, so it ends
  `lost` (resuming it from its last checkpoint, as a pause does, is not built).

Each attempt is a new Ray submission (`JobRow.ray_id` takes the retry count), so a head that
still knows the lost id cannot be confused with the new one.
"""

from __future__ import annotations

from jobs.records.models import RESULT
from jobs.records.run_files import RunFiles
from service.jobs.states import JobReason
from service.store import JobRow, JobStore

LOST = "Ray has no record of this job: its head was replaced (a restart, a new cluster)"


def start_timed_out(store: JobStore, job: JobRow, reason: JobReason | None) -> bool:
    """Its workers never started (Ray Train's start-up timeout) and it ran no step."""
    if reason != "insufficient_resources":
        return False
    now = store.get(job.id)  # its metrics were copied just now
    return now is not None and now.metrics_count == 0


def can_go_on_when_lost(job: JobRow) -> bool:
    """A sweep (Tune resumes it), or a job that has not run a step."""
    return job.kind == "tune" or job.metrics_count == 0


def set_result_aside(storage: str, job: JobRow, retry: int) -> None:
    """The attempt's result.json (if it wrote one) goes aside: the next writes its own."""
    files = RunFiles.for_job(job.id, storage)
    if files.has(RESULT):
        files.fs.move(f"{files.root}/{RESULT}", f"{files.root}/result-start-{retry}.json")
