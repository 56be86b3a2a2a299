"""Preemption: which lower-class running jobs to pause so that a higher-class job waiting for
resources can start. A plain function, plan in and decisions out (no SQL, no Ray, no
clock): the reconciler builds the plan from its rows after each admission pass and asks
the chosen jobs to pause through the pause machinery (service/queue/preempting.py).

The rules:
- Only a job admission holds for lack of resources is helped (`Waiting`, in admission
  order: highest class first); one held by its quota, owner limit or share is not.
- A victim ranks in a strictly lower class, and can checkpoint: a training job that has
  reached a step boundary (never a sweep: sweeps can pause, jobs/tune/pause.py, but the
  scheduler does not preempt them yet; a job still starting has no step yet).
- What is free, plus what jobs already asked to pause will give back, counts first: while
  earlier pauses are on their way nothing more is asked for the same need.
- Never more jobs than needed: the fewest that free enough; among sets that small, lower
  classes first, and within a class the most recently started (it loses the least work).
- When even every eligible job would not free enough, nobody is paused for it, and jobs
  after it are not helped either (they would pass it in the queue).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.queue.resources import EPSILON, Resources


@dataclass(frozen=True)
class Waiting:
    id: str
    rank: int  # its priority class's place (0: lowest)
    needs: Resources  # free resources it needs to start
    cls: str = ""  # the class's name, for the reason


@dataclass(frozen=True)
class Running:
    id: str
    rank: int
    holds: Resources
    started: float  # when it started (any monotone clock): later = less work lost
    checkpointable: bool  # it can pause at a step boundary now
    pausing: bool = False  # a pause is asked already: what it holds comes free soon
    cls: str = ""


@dataclass(frozen=True)
class Preemption:
    victim: str
    for_job: str
    why: str  # the reason, on both jobs' events and in the log


def _cover(job: Running, short: Resources) -> float:
    """How much of what is short `job` would free (0..2: a share of each resource)."""
    part = 0.0
    for have, lack in ((job.holds.cpu, short.cpu), (job.holds.gpu, short.gpu)):
        if lack > EPSILON:
            part += min(have, lack) / lack
    return part


class Pool:
    """The jobs that may be paused, sorted once per pass (by size, by preference), less
    those taken already; what each class holds in all, to refuse a hopeless need at once.
    A pass over thousands of running jobs sorts them once, not once per waiting job."""

    def __init__(self, running: Sequence[Running]):
        jobs = [job for job in running if job.checkpointable and not job.pausing]
        self.by_cpu = sorted(jobs, key=lambda j: (j.holds.cpu, j.holds.gpu), reverse=True)
        self.by_gpu = sorted(jobs, key=lambda j: (j.holds.gpu, j.holds.cpu), reverse=True)
        self.by_preference = sorted(jobs, key=lambda j: (j.rank, -j.started, j.id))
        self.taken: set[str] = set()
        self.held: dict[int, Resources] = {}
        for job in jobs:
            self.held[job.rank] = self.held.get(job.rank, Resources()) + job.holds

    def below(self, rank: int) -> Resources:
        return sum((held for r, held in self.held.items() if r < rank), Resources())

    def take(self, job: Running) -> None:
        self.taken.add(job.id)
        self.held[job.rank] = self.held[job.rank] - job.holds


def _fills(
    by_size: Sequence[Running], skip: set[str], rank: int, short: Resources, slots: int
) -> bool:
    """Whether `slots` jobs below `rank` not in `skip`, biggest first, free `short`."""
    left = short
    for job in by_size:
        if left.empty or slots == 0:
            break
        if job.rank < rank and job.id not in skip:
            left, slots = left - job.holds, slots - 1
    return left.empty


def fewest(pool: Pool, rank: int, short: Resources) -> list[Running] | None:
    """The fewest jobs of `pool` below class `rank` whose resources together free `short`
    (lower classes and later starts preferred among equally few), or None when all of
    them would not.

    How few: the biggest first (exact for one resource). Which: in order of preference,
    each job is taken when the biggest of those not yet passed over can still make up the
    rest in the slots left."""
    if short.empty:
        return []
    if not short.fits_in(pool.below(rank)):
        return None
    by_size = pool.by_gpu if short.gpu > EPSILON else pool.by_cpu
    greedy: list[Running] = []
    left = short
    for job in by_size:
        if left.empty:
            break
        if job.rank < rank and job.id not in pool.taken:
            greedy.append(job)
            left = left - job.holds
    if not left.empty:
        return None
    chosen: list[Running] = []
    passed = set(pool.taken)
    left = short
    for job in pool.by_preference:
        if left.empty or len(chosen) == len(greedy) or job.rank >= rank:
            break  # sorted by class: the rest rank too high
        if job.id in passed:
            continue
        passed.add(job.id)
        after = left - job.holds
        slots = len(greedy) - len(chosen) - 1
        if _cover(job, left) > 0 and _fills(by_size, passed, rank, after, slots):
            chosen.append(job)
            left = after
    return chosen if left.empty else greedy  # two resources: the greedy set is still few


def plan_preemptions(
    waiting: Sequence[Waiting], running: Sequence[Running], free: Resources
) -> list[Preemption]:
    """The pauses to ask for now. `free` is what admission left unused this pass."""
    top = max((job.rank for job in waiting), default=0)
    if not any(j.rank < top and j.checkpointable and not j.pausing for j in running):
        return []  # one class, or nothing lower that can pause: no sorting, no plan
    soon = free + sum((job.holds for job in running if job.pausing), Resources())
    pool = Pool(running)
    decided: list[Preemption] = []
    for job in waiting:
        if job.needs.fits_in(soon):
            soon = soon - job.needs  # it starts once the pauses asked for have landed
            continue
        chosen = fewest(pool, job.rank, job.needs - soon)
        if chosen is None:
            break  # it waits for jobs to end; nothing behind it is helped past it
        for victim in chosen:
            pool.take(victim)
            why = (
                f"preempted by {job.id} ({job.cls or job.rank}, needs {job.needs}; "
                f"{soon} free): {victim.id} ({victim.cls or victim.rank}) holds {victim.holds}"
            )
            decided.append(Preemption(victim.id, job.id, why))
        soon = soon + sum((v.holds for v in chosen), Resources()) - job.needs
    return decided
