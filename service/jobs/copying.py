"""What the reconciler copies from a running job into the database: the driver log (up to
a cap) and the metrics and trials its run folder holds; and, once it ends, the log as
copied into `driver.log` beside its checkpoints.

Bounded work per pass: once a log passes the cap, a marker says so and Ray is no longer
asked for it (its Jobs API has no offsets: every ask returns the whole log); `driver.log`
is written once, at the end, not again on every new line.
"""

from __future__ import annotations

import logging

from sqlalchemy.exc import IntegrityError

from jobs.records.run_files import RunFiles
from service.backends.ray_backend import Backend, RayUnreachableError
from service.jobs.logstream import whole_log
from service.store import JobRow, JobStore

log = logging.getLogger(__name__)

TRUNCATED = "\n[numtune: the log was cut here at {cap} characters; Ray's job log has the rest]\n"


class RunCopier:
    def __init__(self, store: JobStore, backend: Backend, storage: str, max_log_chars: int):
        self.store = store
        self.backend = backend
        self.storage = storage
        self.max_log_chars = max_log_chars

    def logs(self, job: JobRow, *, ended: bool) -> str:
        """Copy what is new in the job's log; the text Ray returned ("" if not asked)."""
        if job.log_chars >= self.max_log_chars and not ended:
            return ""  # cut already; asked once more at the end, for the log's last lines
        try:
            text = self.backend.logs(job.ray_id)
        except RayUnreachableError:
            return ""
        room = self.max_log_chars - job.log_chars
        if room > 0:
            new = text[job.log_chars :]
            if len(new) > room:
                new = new[:room] + TRUNCATED.format(cap=self.max_log_chars)
            self.store.add_log(job.id, job.log_chars, new)
        return text

    def outputs(self, job: JobRow) -> None:
        """New metrics.jsonl rows, and a tune's trials table, from the run's storage."""
        files = RunFiles.for_job(job.id, self.storage)
        new = [row.as_dict() for row in files.read_metrics()[job.metrics_count :]]
        try:
            self.store.add_metrics(job.id, job.metrics_count, new)
        except IntegrityError:
            log.warning("metrics of %s were copied concurrently; skipping", job.id)
        if job.kind == "tune":
            trials = files.read_trials()
            if trials is not None:
                self.store.set_fields(job.id, trials=[row.model_dump() for row in trials])

    def driver_log(self, job_id: str) -> None:
        """The copied log beside the checkpoints, so the run folder is complete on its own."""
        text = "".join(whole_log(self.store, job_id))
        if text:
            RunFiles.for_job(job_id, self.storage).write_text("driver.log", text)
