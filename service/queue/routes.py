"""GET /v1/usage: compute used over the quota window (service/queue/usage.py), by account and by
job, with each account's limit. An owner reads their own (their group's total included);
the admin reads everyone's, or one owner's with `?owner=`."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from service.auth.callers import Reader
from service.backends.ray_backend import RayUnreachableError
from service.deps import BackendDep, DatabaseDep, SettingsDep
from service.errors import Forbidden
from service.queue.admission import Resources
from service.queue.quotas import Quotas, Usage
from service.queue.usage import JobUsage, by_account, in_window

log = logging.getLogger(__name__)
router = APIRouter(tags=["usage"])


class JobUsageOut(BaseModel):
    id: str
    kind: str
    owner: str
    status: str
    cpus: float  # held while it ran
    gpus: float
    started_at: datetime | None
    finished_at: datetime | None
    seconds: float  # of its running time inside the window
    cpu_seconds: float
    gpu_seconds: float


class AccountUsageOut(BaseModel):
    account: str  # the owner, or their quota group
    owners: list[str]  # whose jobs are counted here (of those the caller may see)
    cpu_seconds: float
    gpu_seconds: float
    cpu_seconds_limit: float | None
    gpu_seconds_limit: float | None
    over_quota: bool  # their queued jobs wait until usage leaves the window


class UsageOut(BaseModel):
    window_s: float
    since: datetime
    until: datetime
    accounts: list[AccountUsageOut]
    jobs: list[JobUsageOut]


def _job_out(each: JobUsage) -> JobUsageOut:
    row = each.job
    return JobUsageOut(
        id=row.id,
        kind=row.kind,
        owner=row.owner,
        status=row.status,
        cpus=each.held.cpu,
        gpus=each.held.gpu,
        started_at=row.started_at,
        finished_at=row.finished_at,
        seconds=each.seconds,
        cpu_seconds=each.usage.cpu_seconds,
        gpu_seconds=each.usage.gpu_seconds,
    )


def _accounts(usages: list[JobUsage], quotas: Quotas, shown: set[str]) -> list[AccountUsageOut]:
    totals = by_account(usages, quotas)
    out = []
    for account in sorted({quotas.account(owner) for owner in shown}):
        used = totals.get(account, Usage())
        limit = quotas.limit(account)
        owners = sorted(o for o in shown if quotas.account(o) == account)
        out.append(
            AccountUsageOut(
                account=account,
                owners=owners,
                cpu_seconds=used.cpu_seconds,
                gpu_seconds=used.gpu_seconds,
                cpu_seconds_limit=limit.cpu_seconds,
                gpu_seconds_limit=limit.gpu_seconds,
                over_quota=quotas.over(owners[0], used) is not None,
            )
        )
    return out


def _jobs_total(backend: BackendDep, reserved: float) -> Resources | None:
    """What the cluster has for jobs (a sweep's charge is capped by it); None if unknown."""
    try:
        capacity = backend.capacity()
    except RayUnreachableError as error:
        log.info("usage: cluster size unknown (%s); sweeps charged uncapped", error)
        return None
    return capacity.total - Resources(reserved) if capacity is not None else None


@router.get("/v1/usage", response_model=UsageOut)
def usage(
    who: Reader,
    db: DatabaseDep,
    settings: SettingsDep,
    backend: BackendDep,
    owner: Annotated[str | None, Query(max_length=63)] = None,
) -> UsageOut:
    """CPU- and GPU-seconds used over the quota window (NUMTUNE_QUOTA_WINDOW_S), per job and
    per account (an owner, or their quota group), with each account's limit. A group's total
    counts every member's jobs; the jobs listed are only those the caller may see."""
    if owner is not None and owner != who.owner and not who.is_admin:
        raise Forbidden("only the admin may read another owner's usage")
    quotas = settings.quotas
    seen = owner or (None if who.is_admin else who.owner)
    # A group's total needs every member's jobs; the caller sees only their own listed.
    members = None
    if seen is not None:
        account = quotas.account(seen)
        members = [o for o, group in quotas.groups.items() if group == account] or [seen]
    until = datetime.now(UTC)
    total = _jobs_total(backend, settings.reserved_cpus)
    usages = in_window(db, quotas.window_s, total, members, now=until)
    mine = [u for u in usages if seen is None or u.job.owner == seen]
    shown = {seen} if seen is not None else {u.job.owner for u in usages}
    return UsageOut(
        window_s=quotas.window_s,
        since=until - timedelta(seconds=quotas.window_s),
        until=until,
        accounts=_accounts(usages, quotas, shown),
        jobs=[_job_out(u) for u in mine],
    )
