"""Compute usage: what each job held (its workers' CPUs and GPUs, as admission counts them)
times how long it ran (started_at to finished_at, or to now while it runs; a paused job's
time in the pause is not use, its runs before a resume are), counted over a
rolling window: a job that ran partly inside the window counts for that part only. The
quotas (service/queue/quotas.py) and `GET /v1/usage` read it.

A sweep holds one trial's resources as many times as trials may run at once, capped by
what the cluster has for jobs (as admission does); without the cluster's size (Ray not
answering) it is charged every trial it may run at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from service.queue.admission import Capacity, Policy, Resources, need_known, need_of
from service.queue.quotas import Quotas, Usage
from service.store import Database, JobRow
from service.store.usage import ran_since, specs


@dataclass(frozen=True)
class JobUsage:
    job: JobRow
    held: Resources  # what it held while running
    seconds: float  # of its running time inside the window
    usage: Usage


def held_by(row: JobRow, total: Resources | None) -> Resources:
    """What a job holds while it runs (nothing if its stored spec no longer reads)."""
    needed = need_of(row)
    if needed is None:
        return Resources()
    if total is not None:
        return needed.held(total)
    return Resources(needed.start.cpu * needed.copies, needed.start.gpu * needed.copies)


def running_seconds(row: JobRow, since: datetime, until: datetime) -> float:
    """How long `row` ran inside [since, until]. Its current (or last) run goes from
    started_at to its end, or to its pause while it is paused (ran_until after started_at);
    the runs before its last resume are ran_seconds in all, placed as ending where they
    must have ended, so only the part of them after `since` counts (at most: they may
    have ended sooner)."""
    began = max(row.started_at or until, since)
    ended = min(row.finished_at or until, until)
    stopped = row.ran_until
    if row.started_at is not None and stopped is not None and stopped > row.started_at:
        ended = min(ended, stopped)  # paused now: the pause is not use
    seconds = max(0.0, (ended - began).total_seconds())
    if row.ran_seconds and stopped is not None:
        # They ended by the last pause, or before the last run began if it is paused now.
        ended_by = min(stopped, row.started_at or stopped, until)
        seconds += min(row.ran_seconds, max(0.0, (ended_by - since).total_seconds()))
    return seconds


def job_usage(row: JobRow, since: datetime, until: datetime, total: Resources | None) -> JobUsage:
    seconds = running_seconds(row, since, until)
    held = held_by(row, total)
    return JobUsage(row, held, seconds, Usage(held.cpu * seconds, held.gpu * seconds))


def by_account(usages: Sequence[JobUsage], quotas: Quotas) -> dict[str, Usage]:
    """Usage summed by account (an owner's group, else the owner)."""
    totals: dict[str, Usage] = defaultdict(Usage)
    for each in usages:
        account = quotas.account(each.job.owner)
        totals[account] = totals[account] + each.usage
    return dict(totals)


def in_window(
    db: Database,
    window_s: float,
    total: Resources | None,
    owners: Sequence[str] | None = None,
    now: datetime | None = None,
) -> list[JobUsage]:
    """Every job's usage inside the window that ends now (only `owners`' when given)."""
    until = now or datetime.now(UTC)
    since = until - timedelta(seconds=window_s)
    rows = ran_since(db, since, owners)
    unknown = {(r.kind, r.spec_sha256) for r in rows if not need_known(r.kind, r.spec_sha256)}
    if unknown:  # read each spec admission has not seen yet, once
        found = specs(db, unknown)
        for row in rows:
            row.spec_json = found.get((row.kind, row.spec_sha256), row.spec_json)
    return [job_usage(row, since, until, total) for row in rows]


def quota_usage(
    db: Database, policy: Policy, capacity: Capacity | None, now: datetime | None = None
) -> dict[str, Usage] | None:
    """Usage by account for one admission pass; None (nothing read) when no quota bounds."""
    quotas = policy.quotas
    if quotas is None or not quotas.bounded:
        return None
    total = capacity.total - policy.reserved if capacity is not None else None
    return by_account(in_window(db, quotas.window_s, total, now=now), quotas)
