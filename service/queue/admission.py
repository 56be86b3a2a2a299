"""Admission: which queued jobs go to Ray now, in what order the rest wait, and why.

Ray never sees a job that cannot start: a job handed to Ray while another holds the CPUs
waits for its worker group, and Ray Train gives up after 60 s per attempt (three attempts,
then the job fails with `insufficient_resources`). So the reconciler submits a queued job
only when its workers fit what is free, and keeps the others `queued` with their place in
line and what they wait for. A job that needs more than the whole cluster is refused at
once (`does_not_fit`) with what would fit.

What jobs may have is the cluster less what the admin reserves for serving (its replicas
hold CPUs that Ray counts as used, and a replica may start or scale up after a job was
admitted); what is free now is the smaller of Ray's own report and that, less what the
jobs we handed to Ray hold.

Order: submission order, with fairness between owners: an owner's k-th waiting job ranks
after every other owner's earlier ones (counting the jobs each owner had started since the
oldest waiting job came in), so one owner's batch does not hold everyone else back. A job
that does not fit now does not block later ones that do (backfill), until it has waited
the aging limit: then nothing behind it starts, and it gets the next free resources. Jobs
held only by their owner's concurrency limit step aside and block nobody.

Priority classes (service/queue/priorities.py) come first: a higher class is admitted first, the
fair order holds within a class, and a lower class never backfills into what a waiting
higher-class job lacks (its decision says what it needs: service/queue/preemption.py may pause
lower-class running jobs for it).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from jobs.spec import TRIAL_DRIVER_CPU, JobSpec, TuneSpec
from service.jobs.states import JobReason
from service.queue.priorities import PriorityClasses, class_of
from service.queue.quotas import Quotas, Usage, held_by_quota
from service.queue.resources import EPSILON, Capacity, Resources
from service.store import JobRow, UnreadableSpecError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Need:
    start: Resources  # free resources it needs to start: a job's workers, one trial
    copies: int = 1  # how many of those it may hold at once (a sweep's concurrent trials)

    def held(self, total: Resources) -> Resources:
        """The most it may hold once running: no more trials than the cluster has room for."""
        fits = self.copies
        for have, each in ((total.cpu, self.start.cpu), (total.gpu, self.start.gpu)):
            ratio = have / each if each else math.inf
            if math.isfinite(ratio):  # a vanishing share must not raise (floor of inf)
                fits = min(fits, math.floor(ratio + EPSILON))
        count = max(1, min(fits, self.copies))
        return Resources(self.start.cpu * count, self.start.gpu * count)


def need(spec: JobSpec | TuneSpec) -> Need:
    """What the job asks of the cluster: its workers; for a sweep, one trial's, as many
    times as trials may run at once."""
    if isinstance(spec, TuneSpec):
        copies = spec.max_concurrent_trials or spec.total_trials
        return Need(Resources(*spec.trial_reserved), copies)
    return Need(Resources(*spec.scaling.reserved))


def need_of(row: JobRow) -> Need | None:
    """need() of a stored job, None if its stored spec no longer validates; remembered by
    its spec's digest: a pass over thousands of queued jobs reads each distinct spec once,
    not once per pass."""
    key = (row.kind, row.spec_sha256)
    if key not in _NEEDS:
        if len(_NEEDS) >= _NEEDS_MAX:
            _NEEDS.clear()
        try:
            _NEEDS[key] = need(row.spec)
        except UnreadableSpecError:
            _NEEDS[key] = None
    return _NEEDS[key]


def need_known(kind: str, spec_sha256: str) -> bool:
    """Whether need_of() has this spec already (a row without its spec JSON will do)."""
    return (kind, spec_sha256) in _NEEDS


_NEEDS: dict[tuple[str, str], Need | None] = {}
_NEEDS_MAX = 100_000


def does_not_fit(
    spec: JobSpec | TuneSpec, start: Resources, total: Resources, reserved: Resources
) -> str:
    if isinstance(spec, TuneSpec):
        what, prefix, room = "one trial of this sweep needs", "base.scaling", TRIAL_DRIVER_CPU
        workers = spec.base.scaling.num_workers
    else:
        what, prefix, room = "this job's workers need", "scaling", 0.0
        workers = spec.scaling.num_workers
    room_for_jobs = total - reserved
    has = (
        f"jobs get {room_for_jobs} of the cluster's {total} ({reserved} kept for serving)"
        if reserved.cpu or reserved.gpu
        else f"the whole cluster has {total}"
    )
    fixes = []  # one for each resource that does not fit, named (a GPU job: its GPUs)
    gpu_short = start.gpu > room_for_jobs.gpu + EPSILON
    if start.cpu > room_for_jobs.cpu + EPSILON or not gpu_short:
        most = max(0.0, math.floor((room_for_jobs.cpu - room) / workers * 100) / 100)
        fixes.append(
            f"{prefix}.cpus_per_worker <= {most:.2f} with {workers} workers, or fewer workers"
        )
    if gpu_short:
        each = start.gpu / workers
        fixes.append(
            f"GPU: {prefix}.num_workers <= {math.floor(room_for_jobs.gpu / each + EPSILON)}"
            f" ({each:g} GPU each), or {prefix}.gpus_per_worker <= "
            f"{math.floor(room_for_jobs.gpu / workers * 100) / 100:.2f}"
            if room_for_jobs.gpu > EPSILON
            else f"GPU: none here for jobs; {prefix}.use_gpu false, or a cluster with GPUs"
        )
    return f"{what} {start} but {has}. What fits: " + "; ".join(fixes)


Action = Literal["submit", "wait", "reject"]


@dataclass(frozen=True)
class Decision:
    job: JobRow
    action: Action
    position: int | None = None
    why: str | None = None  # what it waits for, or why it can never run
    reason: JobReason | None = None  # the failure reason code of a rejection
    needs: Resources | None = None  # waits for resources: what would let it start


def fair_order(
    queued: Sequence[JobRow], served: Counter[str], rank: Callable[[JobRow], int] | None = None
) -> list[JobRow]:
    """Higher priority class (`rank`) first; within a class oldest first, but an owner's
    k-th waiting job of the class ranks after every other owner's (k-1)-th, counting the
    jobs each owner already had started while the oldest one waited (`served`): round
    robin between owners."""
    seen: Counter[tuple[str, int]] = Counter()
    ranked = []
    for row in sorted(queued, key=lambda r: (r.created_at, r.id)):
        level = rank(row) if rank else 0
        turn = served[row.owner] + seen[row.owner, level]
        ranked.append((-level, turn, row.created_at, row.id, row))
        seen[row.owner, level] += 1
    return [row for *_, row in sorted(ranked, key=lambda t: t[:4])]


@dataclass(frozen=True)
class Policy:
    """The admin's rules of admission (service settings)."""

    reserved: Resources = field(default_factory=Resources)  # held by the serving replicas
    aging_s: float = 600.0  # waited this long, a job that does not fit holds back the rest
    max_running_per_owner: int | None = None
    # While another owner's job waits, one owner's jobs may hold at most this share of what
    # jobs may have (their first job always starts): no owner takes every CPU from others
    # who are waiting. None: no bound (NUMTUNE_OWNER_SHARE).
    owner_share: float | None = 0.5
    # Compute quotas over a rolling window (service/queue/quotas.py): an owner over theirs waits.
    quotas: Quotas | None = None
    # Priority classes; whether running jobs may be paused for a higher class's.
    priorities: PriorityClasses = field(default_factory=PriorityClasses)
    preemption: bool = True


@dataclass
class _Pass:
    """One admission pass's running tally: what is still free, whose jobs run, and the
    job (if any) that has waited past the aging limit and now gets the next resources."""

    total: Resources  # what jobs may have at most: the cluster less what is reserved
    free: Resources
    running: Counter[str]
    now: datetime
    policy: Policy
    position: int = 0
    reserving: JobRow | None = None
    held: dict[str, Resources] = field(default_factory=dict)  # by owner: what their jobs hold
    waiting: Counter[str] = field(default_factory=Counter)  # by owner: jobs not yet started
    over_quota: dict[str, str] = field(default_factory=dict)  # by owner: why they wait
    # The first job to wait for resources (of the highest class that does): its id, its
    # class's rank and what it lacks; lower classes may not take that.
    ahead: tuple[str, int, Resources] | None = None

    def decide(self, row: JobRow) -> Decision:
        needed = need_of(row)
        if needed is None:
            why = "the stored spec does not validate"
            return Decision(row, "reject", why=why, reason="invalid_spec")
        if not needed.start.fits_in(self.total):
            whole = self.total + self.policy.reserved
            why = does_not_fit(row.spec, needed.start, whole, self.policy.reserved)
            return Decision(row, "reject", why=why, reason="does_not_fit")
        if row.owner in self.over_quota:  # held, never failed: usage leaves the window
            self.position += 1
            return Decision(row, "wait", self.position, self.over_quota[row.owner])
        limit = self.policy.max_running_per_owner
        running = self.running[row.owner]
        if limit is not None and running >= limit:
            self.position += 1
            why = f"owner limit: {running} of {row.owner}'s jobs running (limit {limit})"
            return Decision(row, "wait", self.position, why)
        if self._over_share(row.owner, needed):
            self.position += 1
            return Decision(row, "wait", self.position, self._share_why(row.owner))
        level = self.policy.priorities.rank(class_of(row))
        if self._held_back(level, needed.start):
            self.position += 1
            return Decision(row, "wait", self.position, self._ahead_why())
        if self.reserving is None and needed.start.fits_in(self.free):
            self.free = self.free - needed.held(self.total)
            self.running[row.owner] += 1
            self.held[row.owner] = self.held.get(row.owner, Resources()) + needed.held(self.total)
            self.waiting[row.owner] -= 1
            return Decision(row, "submit")
        self.position += 1
        if self.reserving is not None:
            why = f"its turn: {self.reserving.id} has waited longest and gets the next resources"
            return Decision(row, "wait", self.position, why)
        why = f"resources: needs {needed.start}, {self.free} free of {self.total}"
        if self.ahead is None:
            self.ahead = (row.id, level, needed.start - self.free)
        waited = (self.now - row.created_at).total_seconds()
        if waited >= self.policy.aging_s:
            self.reserving = row  # aged: nothing behind it starts until it has
            why += f" (waited {waited:.0f} s: next to start)"
        return Decision(row, "wait", self.position, why, needs=needed.start)

    def _held_back(self, level: int, start: Resources) -> bool:
        """Whether a job of class rank `level` would take what a higher class waits for."""
        if self.ahead is None or level >= self.ahead[1]:
            return False
        short = self.ahead[2]
        return (short.cpu > EPSILON < start.cpu) or (short.gpu > EPSILON < start.gpu)

    def _ahead_why(self) -> str:
        job, _, short = self.ahead or ("?", 0, Resources())
        return f"priority: {job}, of a higher class, waits for {short} more; this may not take it"

    def _over_share(self, owner: str, needed: Need) -> bool:
        """Whether starting it would take `owner` past their share while others wait."""
        share, held = self.policy.owner_share, self.held.get(owner)
        others = any(n > 0 for who, n in self.waiting.items() if who != owner)
        if share is None or held is None or not others:
            return False
        cap = Resources(self.total.cpu * share, self.total.gpu * share)
        return not (held + needed.held(self.total)).fits_in(cap)

    def _share_why(self, owner: str) -> str:
        share = self.policy.owner_share or 0.0
        return (
            f"owner share: {owner}'s jobs hold {self.held[owner]} of {self.total}; while other "
            f"owners' jobs wait, one owner's may hold at most {share:.0%} (NUMTUNE_OWNER_SHARE)"
        )


def plan(
    queued: Sequence[JobRow],
    active: Sequence[JobRow],
    capacity: Capacity | None,
    *,
    served: Counter[str] | None = None,
    policy: Policy = Policy(),
    now: datetime | None = None,
    unknown: str = "Ray's cluster status (not reported yet)",
    usage: Mapping[str, Usage] | None = None,
) -> list[Decision]:
    """A decision for every queued job. `active` are the jobs Ray has (submitted/running);
    `capacity` None means Ray's resources are unknown right now (`unknown` says why);
    `served` counts by owner the jobs started since the oldest queued one was submitted;
    `usage` is by quota account over the policy's window (service/queue/usage.py).

    A job that does not fit now lets later ones that do start (backfill) until it has
    waited `policy.aging_s`; from then on nothing behind it starts, so the running jobs
    drain and it is next. One job whose planning raises is skipped (its decision says
    why), never the whole pass."""
    order = fair_order(queued, served or Counter(), lambda r: policy.priorities.rank(class_of(r)))
    if capacity is None:
        return [Decision(r, "wait", i + 1, unknown) for i, r in enumerate(order)]
    total, free = free_now(capacity, active, policy)
    running = Counter(row.owner for row in active)
    tally = _Pass(total, free, running, now or datetime.now(UTC), policy)
    for row in active:
        asked = need_of(row)
        owned = tally.held.get(row.owner, Resources())
        tally.held[row.owner] = owned + (asked.held(total) if asked else Resources())
    tally.over_quota = held_by_quota(policy.quotas, (row.owner for row in queued), usage)
    # An owner held by their quota cannot start anything: their jobs bound nobody's share.
    tally.waiting.update(row.owner for row in queued if row.owner not in tally.over_quota)
    decisions: list[Decision] = []
    for row in order:
        try:
            decisions.append(tally.decide(row))
        except Exception as error:  # one bad row must not stop every owner's jobs
            log.exception("admission: could not plan %s; skipping it this pass", row.id)
            why = f"admission could not plan it: {type(error).__name__}: {error}"
            decisions.append(Decision(row, "wait", None, why[:2000]))
    return decisions


def free_now(
    capacity: Capacity, active: Sequence[JobRow], policy: Policy
) -> tuple[Resources, Resources]:
    """What jobs may have at most (the cluster less what is reserved), and what is free of
    it: the smaller of Ray's report and that total less what `active` jobs hold."""
    total = capacity.total - policy.reserved
    holding = Resources()
    for row in active:
        asked = need_of(row)
        holding = holding + (asked.held(total) if asked else Resources())
    # Ray's own view lags a job just handed to it; ours misses what others reserved.
    free = Resources(
        min(capacity.available.cpu, max(0.0, total.cpu - holding.cpu)),
        min(capacity.available.gpu, max(0.0, total.gpu - holding.gpu)),
    )
    return total, free
