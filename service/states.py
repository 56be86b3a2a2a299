"""A job's (or sweep's) states and the moves between them: the one list that the API's
schemas, the store's compare-and-set and the reconciler's writes all use. Kept free of
imports so the client CLI can read it without the database layer."""

from __future__ import annotations

from typing import Literal, get_args

JobStatus = Literal["queued", "submitted", "running", "succeeded", "failed", "cancelled"]
JOB_STATES: tuple[JobStatus, ...] = get_args(JobStatus)
ACTIVE: tuple[JobStatus, ...] = ("queued", "submitted", "running")
TERMINAL: frozenset[JobStatus] = frozenset(JOB_STATES) - frozenset(ACTIVE)
# The job's own state machine, apart from Ray's status; terminal states have no way out.
ALLOWED: dict[str, frozenset[JobStatus]] = {
    "queued": frozenset({"submitted", "failed", "cancelled"}),
    "submitted": frozenset({"running", "succeeded", "failed", "cancelled"}),
    "running": frozenset({"succeeded", "failed", "cancelled"}),
}
