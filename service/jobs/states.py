"""A job's (or sweep's) states and the moves between them: the one list that the API's
schemas, the store's compare-and-set and the reconciler's writes all use; and why a job
failed. Kept free of the database layer so the client CLI can read it."""

from __future__ import annotations

from typing import Literal, get_args

from jobs.records.models import Reason

JobStatus = Literal["queued", "submitted", "running", "succeeded", "failed", "cancelled", "paused"]
JOB_STATES: tuple[JobStatus, ...] = get_args(JobStatus)
ACTIVE: tuple[JobStatus, ...] = ("queued", "submitted", "running")
# Paused (service/jobs/pausing.py): neither active (it holds nothing, admission skips it) nor
# ended (a resume queues it again).
TERMINAL: frozenset[JobStatus] = frozenset(JOB_STATES) - frozenset(ACTIVE) - {"paused"}
# The job's own state machine, apart from Ray's status; terminal states have no way out.
# The one way back, submitted/running -> queued (its workers did not start before its
# first step, or Ray lost it with its head and it can go on: a bounded retry,
# service/jobs/requeueing.py), is not a plain transition: `store.outbox.requeue` does it.
ALLOWED: dict[str, frozenset[JobStatus]] = {
    "queued": frozenset({"submitted", "failed", "cancelled", "paused"}),
    "submitted": frozenset({"running", "succeeded", "failed", "cancelled", "paused"}),
    "running": frozenset({"succeeded", "failed", "cancelled", "paused"}),
    "paused": frozenset({"queued", "cancelled"}),
}

# Why a job failed or was cancelled: what the job itself wrote in result.json (`Reason`),
# or an end the service saw and the job could not report.
ServiceReason = Literal[
    "cancelled",  # by its owner or an admin
    "lost",  # Ray has no record of it (head replaced)
    "timeout",  # ran past its time limit
    "ray_unreachable",  # Ray did not answer for longer than the service waits
    "storage_error",  # its request file could not be written
    "no_result",  # ended without a readable result.json
]
JobReason = Reason | ServiceReason
