"""Compute quotas: how many CPU- and GPU-seconds one owner's jobs (or one group of owners'
jobs together) may use over a rolling window. Admission holds a queued job whose owner is
over quota (`waiting_for: quota: ...`); it never fails it, and the job starts once enough
of the usage has left the window. A share of the cluster at any moment is the other bound:
NUMTUNE_OWNER_SHARE (service/queue/admission.py).

Plain rules here (no SQL, no Ray): what was used is counted by `service/queue/usage.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field


class QuotaLimit(BaseModel):
    """What one owner or group may use per window; None: no bound on that resource."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_seconds: float | None = Field(None, gt=0)
    gpu_seconds: float | None = Field(None, gt=0)


@dataclass(frozen=True)
class Usage:
    """Resource-seconds used: CPUs held × seconds running, summed over jobs."""

    cpu_seconds: float = 0.0
    gpu_seconds: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.cpu_seconds + other.cpu_seconds, self.gpu_seconds + other.gpu_seconds)


@dataclass(frozen=True)
class Quotas:
    """The admin's quotas (NUMTUNE_QUOTA_*): the window, a default limit for every account,
    limits by owner or group name, and the groups (owner -> group). An owner in a group is
    counted with the group's other owners, under the group's limit."""

    window_s: float = 86_400.0
    default: QuotaLimit = field(default_factory=QuotaLimit)
    limits: Mapping[str, QuotaLimit] = field(default_factory=dict)
    groups: Mapping[str, str] = field(default_factory=dict)

    @property
    def bounded(self) -> bool:
        """Whether any account has a bound (else admission need not count usage at all)."""
        every = [self.default, *self.limits.values()]
        return any(q.cpu_seconds is not None or q.gpu_seconds is not None for q in every)

    def account(self, owner: str) -> str:
        """Whose usage an owner's jobs count under: their group, else themselves."""
        return self.groups.get(owner, owner)

    def limit(self, account: str) -> QuotaLimit:
        return self.limits.get(account, self.default)

    def over(self, owner: str, used: Usage) -> str | None:
        """Why `owner` may start nothing now (their account's usage reached its limit), or
        None. `used` is the account's usage over the window."""
        account = self.account(owner)
        limit = self.limit(account)
        whose = account if account == owner else f"group {account} (of {owner})"
        hours = self.window_s / 3600
        for name, have, most in (
            ("CPU", used.cpu_seconds, limit.cpu_seconds),
            ("GPU", used.gpu_seconds, limit.gpu_seconds),
        ):
            if most is not None and have >= most:
                return (
                    f"quota: {whose} used {have:,.0f} {name}-seconds of {most:,.0f} in the "
                    f"last {hours:g} h; it starts as that usage leaves the window"
                )
        return None


def groups_by_owner(groups: Mapping[str, list[str]]) -> dict[str, str]:
    """NUMTUNE_QUOTA_GROUPS ({group: [owners]}) as owner -> group; an owner in two groups
    is refused (their usage would count twice, or under whichever came last)."""
    found: dict[str, str] = {}
    for group, owners in groups.items():
        for owner in owners:
            if found.setdefault(owner, group) != group:
                raise ValueError(f"owner {owner!r} is in two groups: {found[owner]}, {group}")
    return found


def held_by_quota(
    quotas: Quotas | None, owners: Iterable[str], usage: Mapping[str, Usage] | None
) -> dict[str, str]:
    """Owners among `owners` whose account is over quota, with why (`usage` by account);
    none without quotas or usage."""
    if quotas is None or usage is None:
        return {}
    found = {}
    for owner in set(owners):
        why = quotas.over(owner, usage.get(quotas.account(owner), Usage()))
        if why is not None:
            found[owner] = why
    return found
