"""Follow every non-terminal job until it ends: submit queued ones to Ray once they fit
(`service/queue/admission.py` decides), mirror Ray's status into our state machine, stop jobs
past their time limit, and copy logs, metrics and the result into the database.

It keeps no state of its own: each pass starts from the `jobs` table, so after the API
restarts the next pass simply picks every unfinished job up again. All status writes are
compare-and-set, so a cancel from the API and a pass here cannot overwrite each other.
With several API processes on one database only the holder of the `reconciler` lease
(`service/store/lease.py`) runs passes; when it dies another takes the lease and goes on
from the table.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy.exc import SQLAlchemyError

from jobs.records.models import FailureCode, Reason, RunResult, TuneResult
from jobs.records.run_files import RunFiles
from service.backends.ray_backend import (
    TERMINAL_RAY,
    Backend,
    RayJobInfo,
    RayJobMissingError,
    RayUnreachableError,
)
from service.jobs import pausing, requeueing
from service.jobs.copying import RunCopier
from service.jobs.states import JobReason, JobStatus
from service.platform.loop import SupervisedLoop
from service.queue.admission import Decision, Policy, plan
from service.queue.preempting import preempt
from service.queue.usage import quota_usage
from service.store import JobRow, JobStore, Lease, UnreadableSpecError
from service.store.jobs import STOPPING
from service.store.outbox import PENDING, requeue

log = logging.getLogger(__name__)

FinishHook = Callable[[JobRow], object]

# The job's failure codes (result.json, chosen where the run failed: jobs/train/failures.py)
# as the API's reasons, of the same names: a code without one fails here, at import. A run
# that wrote no result.json died too hard to say why: its reason is the generic one below,
# whatever Ray's message and logs say (they are display only).
FAILURE_REASONS = {code: TypeAdapter(Reason).validate_python(code.value) for code in FailureCode}
NO_RESULT_REASON: JobReason = "worker_failed"


def job_reason(result: RunResult) -> JobReason | None:
    """The API's reason for a run's result: its failure code's (None unless it failed)."""
    if result.status != "failed" or result.reason is None:
        return None
    return FAILURE_REASONS[result.reason]


class Reconciler(SupervisedLoop):
    def __init__(
        self,
        store: JobStore,
        backend: Backend,
        storage: str,
        *,
        interval_s: float = 1.0,
        unreachable_timeout_s: float = 300.0,
        submit_attempts: int = 5,
        policy: Policy | None = None,
        start_retries: int = 3,
        max_timeout_s: float | None = None,
        max_log_chars: int = 20_000_000,
        on_finished: list[FinishHook] | None = None,
        lease: Lease | None = None,
    ):
        self.store = store
        self.backend = backend
        self.storage = storage
        self.unreachable_timeout_s = unreachable_timeout_s
        self.submit_attempts = submit_attempts
        self.policy = policy or Policy()
        self.start_retries = start_retries
        self.max_timeout_s = max_timeout_s
        self.on_finished = on_finished or []
        self.ended = 0  # jobs this process ended or queued again: admission reads afresh
        self.copy = RunCopier(store, backend, storage, max_log_chars)
        super().__init__(interval_s, lease)

    def run_once(self) -> None:
        try:
            jobs = self.store.active()
            stopping = self.store.stopping()
        except SQLAlchemyError:
            log.exception("reconciler: database unavailable")
            return
        ended = self.ended
        for job in jobs:
            if job.status != "queued":
                self.isolated(job, self.follow)
        for job in stopping:
            self.isolated(job, self.stop_cancelled)
        self.forget_all_but({job.id for job in [*jobs, *stopping]})
        if any(job.status == "queued" for job in jobs) or self.ended != ended:
            # Afresh when a job ended or went back to the queue just now: it frees its
            # resources for this pass's admission. Otherwise the rows just read will do.
            self.admit(self.store.active() if self.ended != ended else jobs)
        self.passed()

    # ---- admission ----------------------------------------------------------------------

    def admit(self, jobs: list[JobRow]) -> None:
        """Submit the queued jobs that fit; record for the others their place and why."""
        queued = [job for job in jobs if job.status == "queued"]
        active = [job for job in jobs if job.status != "queued"]
        if not queued:
            return
        unknown = "Ray's cluster status (not reported yet)"
        try:
            capacity = self.backend.capacity()
        except RayUnreachableError as error:
            capacity, unknown = None, f"Ray (unreachable: {str(error)[:200]})"
        oldest = min(job.created_at for job in queued)
        decisions = plan(
            queued,
            active,
            capacity,
            served=self.store.submitted_since(oldest),
            policy=self.policy,
            unknown=unknown,
            usage=quota_usage(self.store.db, self.policy, capacity),
        )
        places = []
        for decision in decisions:
            job = decision.job
            if decision.action != "wait":
                self.isolated(job, partial(self.decide, decision=decision))
            elif (job.queue_position, job.waiting_for) != (decision.position, decision.why):
                places.append((job.id, decision.position, decision.why))
        try:
            self.store.set_places(places)
        except SQLAlchemyError:  # only what the record shows while it waits; next pass
            log.exception("reconciler: could not record %d queue places", len(places))
        preempt(self.store.db, self.storage, decisions, active, capacity, self.policy)

    def decide(self, job: JobRow, decision: Decision) -> None:
        if decision.action == "reject":
            self.finish(job, "failed", decision.reason, decision.why)
        else:
            self.submit(job)

    # ---- one job ------------------------------------------------------------------------

    def follow(self, job: JobRow) -> None:
        try:
            info = self.backend.info(job.ray_id)
        except RayJobMissingError:
            self.lost(job)
            return
        except RayUnreachableError as error:
            self.unreachable(job, error)
            return
        seen = (info.status, info.message, None)
        if (job.ray_status, job.ray_message, job.unreachable_since) != seen:  # a write per change
            self.store.set_fields(
                job.id, ray_status=info.status, ray_message=info.message, unreachable_since=None
            )
        self.copy.logs(job, ended=info.status in TERMINAL_RAY)
        self.copy.outputs(job)
        if job.pause_requested_at is not None and info.status not in TERMINAL_RAY:
            pausing.hand_over(self.storage, job)  # the run stops at its next step boundary
        if info.status in TERMINAL_RAY:
            self.finish_from_ray(job, info)
        elif self.overran(job):
            self.backend.stop(job.ray_id)
            limit = self.time_limit(job)
            self.finish(job, "failed", "timeout", f"ran longer than its limit of {limit:g} s")
        elif info.status == "RUNNING" and job.status == "submitted":
            self.store.transition(job.id, "submitted", "running")

    def time_limit(self, job: JobRow) -> float | None:
        """The job's wall-clock limit: its own timeout_s, capped by the service's."""
        try:
            own = job.spec.timeout_s
        except UnreadableSpecError:  # never admitted; rows written by hand can get here
            own = None
        limits = [v for v in (own, self.max_timeout_s) if v is not None]
        return float(min(limits)) if limits else None

    def overran(self, job: JobRow) -> bool:
        limit = self.time_limit(job)
        if limit is None or job.started_at is None:
            return False
        return (datetime.now(UTC) - job.started_at).total_seconds() > limit

    def submit(self, job: JobRow) -> None:
        try:
            pausing.clear_request(self.storage, job)  # an earlier pause's, now resumed
            self.backend.submit(job.id, job.kind, json.dumps(job.spec_json), job.ray_id)
        except RayUnreachableError as error:
            self.store.set_fields(job.id, waiting_for=f"Ray (unreachable: {str(error)[:200]})")
            return
        except OSError as error:  # our side: the request file could not be written
            attempts = job.submit_attempts + 1
            if attempts >= self.submit_attempts:
                detail = f"submission failed {attempts} times; last: {error}"
                self.finish(job, "failed", "storage_error", detail[:2000])
                return
            why = f"retrying submission ({attempts} of {self.submit_attempts} failed: {error})"
            self.store.set_fields(job.id, submit_attempts=attempts, waiting_for=why[:2000])
            raise  # paced by the backoff like any failed step
        if not self.store.transition(
            job.id,
            "queued",
            "submitted",
            unreachable_since=None,
            queue_position=None,
            waiting_for=None,
        ):
            # Cancelled while we submitted: take it back out of Ray (retried until Ray
            # answers: the marker keeps it on the reconciler's list across restarts).
            log.info("job %s was cancelled during submission; stopping it in Ray", job.id)
            self.store.set_fields(job.id, ray_status=STOPPING)
            self.stop_cancelled(job)

    def stop_cancelled(self, job: JobRow) -> None:
        self.backend.stop(job.ray_id)
        self.store.set_fields(job.id, ray_status="STOPPED")

    def unreachable(self, job: JobRow, error: Exception) -> None:
        stamp = datetime.now(UTC)
        since = job.unreachable_since
        if since is None:
            self.store.set_fields(job.id, unreachable_since=stamp, ray_message=str(error)[:2000])
            return
        if (stamp - since).total_seconds() > self.unreachable_timeout_s:
            detail = f"Ray unreachable for over {self.unreachable_timeout_s:.0f} s: {error}"
            self.finish(job, "failed", "ray_unreachable", detail[:2000])

    def finish_from_ray(self, job: JobRow, info: RayJobInfo) -> None:
        if info.status == "STOPPED":
            self.finish(job, "cancelled", "cancelled", info.message)
            return
        model, name = (TuneResult, "TuneResult") if job.kind == "tune" else (RunResult, "RunResult")
        try:
            result = RunFiles.for_job(job.id, self.storage).read_result(model)
        except ValidationError as error:
            detail = f"its result.json is not a {name}: {error}"
            self.finish(job, "failed", "no_result", detail[:2000])
            return
        if result is not None and result.status == "paused":
            self.ended += pausing.record_paused(self.store.db, self.storage, job, result)
        elif result is not None and requeueing.start_timed_out(self.store, job, job_reason(result)):
            detail = f"its workers did not start before step 1 ({result.detail or ''})"
            self.back_to_queue(job, "insufficient_resources", detail)
        elif result is not None:
            self.finish(
                job,
                result.status,
                job_reason(result),
                result.detail,
                result=result.model_dump(),
                best_checkpoint=result.best_checkpoint,
            )
        elif info.status == "SUCCEEDED":
            self.finish(job, "failed", "no_result", "the job exited 0 but wrote no result.json")
        else:
            self.finish(job, "failed", NO_RESULT_REASON, info.message)

    def lost(self, job: JobRow) -> None:
        """Ray lost it with its head: back to the queue, unless a result it wrote ends it."""
        if requeueing.ended_by_its_result(self.storage, job):
            self.finish_from_ray(job, RayJobInfo(status="FAILED", message=requeueing.LOST))
        else:
            self.back_to_queue(job, "lost", requeueing.LOST)

    def back_to_queue(self, job: JobRow, reason: JobReason, detail: str) -> None:
        """Queue it again (a fresh Ray submission, going on from where it was), or fail it
        with `reason` once its start retries are spent."""
        retries = job.start_retries + 1
        if retries > self.start_retries:
            why = f"after {retries} attempts: {detail}"
            self.finish(job, "failed", reason, why[:2000])
            return
        try:
            kept, detail = requeueing.rewind(self.storage, job, detail)
        except (OSError, ValueError) as error:  # its checkpoint record unreadable: no resume
            self.finish(job, "failed", reason, f"{detail}; cannot resume: {error}"[:2000])
            return
        requeueing.set_result_aside(self.storage, job, retries)
        why = f"back in the queue (retry {retries} of {self.start_retries}): {detail[:300]}"
        if requeue(self.store.db, job.id, job.status, why, metrics_kept=kept):
            self.ended += 1
            log.info("job %s: %s; back in the queue (%d)", job.id, reason, retries)

    def finish(
        self,
        job: JobRow,
        status: JobStatus,
        reason: JobReason | None,
        detail: str | None,
        **fields: Any,
    ) -> None:
        if status == "succeeded" and fields.get("best_checkpoint"):
            # The registration outbox, in the same write as the state
            # (service/registry/registrar.py).
            fields.update(registration_state=PENDING, registration_next_at=datetime.now(UTC))
        if not self.store.transition(
            job.id, job.status, status, reason=reason, detail=detail, **fields
        ):
            return  # someone else (a cancel) ended it first
        self.ended += 1
        log.info("job %s %s%s", job.id, status, f" ({reason})" if reason else "")
        try:
            self.copy.driver_log(job.id)
        except (OSError, ValueError):  # the record is complete without the file
            log.exception("could not write driver.log of %s", job.id)
        done = self.store.get(job.id)
        for hook in self.on_finished:
            if done is None:
                break
            try:
                hook(done)
            except Exception:  # a hook failing must not stop following jobs
                log.exception("after-finish hook failed for %s", job.id)
