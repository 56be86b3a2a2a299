"""Follow every non-terminal job until it ends: submit queued ones to Ray, mirror Ray's
status into our state machine, and copy logs, metrics and the result into the database.

It keeps no state of its own: each pass starts from the `jobs` table, so after the API
restarts the next pass simply picks every unfinished job up again. All status writes are
compare-and-set, so a cancel from the API and a pass here cannot overwrite each other.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from jobs.storage import RunFiles
from service.ray_backend import (
    TERMINAL_RAY,
    Backend,
    RayJobInfo,
    RayJobMissingError,
    RayUnreachableError,
)
from service.store import JobRow, JobStore

log = logging.getLogger(__name__)

# Exit code 2 of `python -m jobs run` means the spec did not validate in the job.
EXIT_CODE_REASONS = {"exit code 2": "invalid_spec"}

FinishHook = Callable[[JobRow], object]


def reason_from_ray(message: str | None, logs: str) -> str:
    """A reason code for a Ray job that failed without writing result.json."""
    text = f"{message or ''}\n{logs[-4000:]}"
    if "OutOfMemoryError" in text or "out of memory" in text.lower():
        return "oom"
    for needle, reason in EXIT_CODE_REASONS.items():
        if needle in text:
            return reason
    return "worker_failed"


class Reconciler:
    def __init__(
        self,
        store: JobStore,
        backend: Backend,
        storage: str,
        *,
        interval_s: float = 1.0,
        unreachable_timeout_s: float = 300.0,
        on_finished: list[FinishHook] | None = None,
    ):
        self.store = store
        self.backend = backend
        self.storage = storage
        self.interval_s = interval_s
        self.unreachable_timeout_s = unreachable_timeout_s
        self.on_finished = on_finished or []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.passes = 0

    # ---- the loop -----------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="reconciler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.run_once()
            self._stop.wait(self.interval_s)

    def run_once(self) -> None:
        try:
            jobs = self.store.active()
        except SQLAlchemyError:
            log.exception("reconciler: database unavailable")
            return
        for job in jobs:
            try:
                self.follow(job)
            except (SQLAlchemyError, OSError, ValueError):
                # One broken job must not stop the others being followed.
                log.exception("reconciler: could not follow %s", job.id)
        self.passes += 1

    # ---- one job ------------------------------------------------------------------------

    def follow(self, job: JobRow) -> None:
        if job.status == "queued":
            self.submit(job)
            return
        try:
            info = self.backend.info(job.id)
        except RayJobMissingError:
            self.finish(job, "failed", "lost", "Ray has no record of this job (head replaced?)")
            return
        except RayUnreachableError as error:
            self.unreachable(job, error)
            return
        self.store.set_fields(
            job.id, ray_status=info.status, ray_message=info.message, unreachable_since=None
        )
        logs = self.copy_logs(job)
        self.copy_outputs(job)
        if info.status == "RUNNING" and job.status == "submitted":
            self.store.transition(job.id, "submitted", "running")
        elif info.status in TERMINAL_RAY:
            self.finish_from_ray(job, info, logs)

    def submit(self, job: JobRow) -> None:
        try:
            self.backend.submit(job.id, job.kind, json.dumps(job.spec))
        except RayUnreachableError as error:
            self.unreachable(job, error)
            return
        if not self.store.transition(job.id, "queued", "submitted", unreachable_since=None):
            # Cancelled while we submitted: take it back out of Ray.
            log.info("job %s was cancelled during submission; stopping it in Ray", job.id)
            self.backend.stop(job.id)

    def unreachable(self, job: JobRow, error: Exception) -> None:
        stamp = datetime.now(UTC)
        since = job.unreachable_since
        if since is None:
            self.store.set_fields(job.id, unreachable_since=stamp, ray_message=str(error)[:2000])
            return
        if (stamp - since).total_seconds() > self.unreachable_timeout_s:
            detail = f"Ray unreachable for over {self.unreachable_timeout_s:.0f} s: {error}"
            self.finish(job, "failed", "ray_unreachable", detail[:2000])

    def copy_logs(self, job: JobRow) -> str:
        try:
            text = self.backend.logs(job.id)
        except RayUnreachableError:
            return ""
        new = text[job.log_chars :]
        if new:
            self.store.add_log(job.id, new)
            # A copy beside the checkpoints too, so the run folder is complete on its own.
            RunFiles.for_job(job.id, self.storage).write_text("driver.log", text)
        return text

    def copy_outputs(self, job: JobRow) -> None:
        """New metrics.jsonl rows, and a tune's trials table, from the run's storage."""
        files = RunFiles.for_job(job.id, self.storage)
        lines = (files.read_text("metrics.jsonl") or "").splitlines()
        new = [json.loads(line) for line in lines[job.metrics_count :] if line.strip()]
        try:
            self.store.add_metrics(job.id, job.metrics_count, new)
        except IntegrityError:
            log.warning("metrics of %s were copied concurrently; skipping", job.id)
        if job.kind == "tune":
            trials = files.read_json("trials.json")
            if trials is not None:
                self.store.set_fields(job.id, trials=trials)

    def finish_from_ray(self, job: JobRow, info: RayJobInfo, logs: str) -> None:
        if info.status == "STOPPED":
            self.finish(job, "cancelled", "cancelled", info.message)
            return
        result: dict[str, Any] | None = RunFiles.for_job(job.id, self.storage).read_json(
            "result.json"
        )
        if result is not None:
            status = "succeeded" if result.get("status") == "succeeded" else "failed"
            self.finish(
                job,
                status,
                result.get("reason") if status == "failed" else None,
                result.get("detail"),
                result=result,
                best_checkpoint=result.get("best_checkpoint"),
            )
        elif info.status == "SUCCEEDED":
            self.finish(job, "failed", "no_result", "the job exited 0 but wrote no result.json")
        else:
            self.finish(job, "failed", reason_from_ray(info.message, logs), info.message)

    def finish(
        self, job: JobRow, status: str, reason: str | None, detail: str | None, **fields: Any
    ) -> None:
        if not self.store.transition(
            job.id, job.status, status, reason=reason, detail=detail, **fields
        ):
            return  # someone else (a cancel) ended it first
        log.info("job %s %s%s", job.id, status, f" ({reason})" if reason else "")
        done = self.store.get(job.id)
        for hook in self.on_finished:
            if done is None:
                break
            try:
                hook(done)
            except Exception:  # a hook (registration) failing must not stop following jobs
                log.exception("after-finish hook failed for %s", job.id)
