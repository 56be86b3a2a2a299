"""Preemption: which lower-class running jobs to pause so that a higher-class job waiting for
resources can start. A plain function, plan in and decisions out (no SQL, no Ray, no
clock): the reconciler builds the plan from its rows after each admission pass and asks
the chosen jobs to pause through the pause machinery (service/preempting.py).

The rules:
- Only a job admission holds for lack of resources is helped (`Waiting`, in admission
  order: highest class first); one held by its quota, owner limit or share is not.
- A victim ranks in a strictly lower class, and can checkpoint: a training job that has
  reached a step boundary (a sweep has no pause; a job still starting has no step yet).
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

from service.resources import EPSILON, Resources


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


def _fills(by_cover: Sequence[Running], passed: set[str], short: Resources, slots: int) -> bool:
    """Whether `slots` jobs not yet passed over, biggest first, free `short`."""
    left = short
    for job in by_cover:
        if left.empty or slots == 0:
            break
        if job.id not in passed:
            left, slots = left - job.holds, slots - 1
    return left.empty


def fewest(eligible: Sequence[Running], short: Resources) -> list[Running] | None:
    """The fewest of `eligible` whose resources together free `short` (lower classes and
    later starts preferred among equally few), or None when all of them would not.

    How few: the biggest first (exact for one resource). Which: in order of preference,
    each job is taken when the biggest of those not yet passed over can still make up the
    rest in the slots left. O(n log n + n·k) for n jobs and k chosen."""
    if short.empty:
        return []
    by_cover = sorted(
        eligible, key=lambda j: (_cover(j, short), j.holds.cpu + j.holds.gpu), reverse=True
    )
    greedy: list[Running] = []
    left = short
    for job in by_cover:
        if left.empty:
            break
        greedy.append(job)
        left = left - job.holds
    if not left.empty:
        return None
    chosen: list[Running] = []
    passed: set[str] = set()
    left = short
    for job in sorted(eligible, key=lambda j: (j.rank, -j.started, j.id)):
        if left.empty or len(chosen) == len(greedy):
            break
        passed.add(job.id)
        after = left - job.holds
        slots = len(greedy) - len(chosen) - 1
        if _cover(job, left) > 0 and _fills(by_cover, passed, after, slots):
            chosen.append(job)
            left = after
    return chosen if left.empty else greedy  # two resources: the greedy set is still few


def plan_preemptions(
    waiting: Sequence[Waiting], running: Sequence[Running], free: Resources
) -> list[Preemption]:
    """The pauses to ask for now. `free` is what admission left unused this pass."""
    soon = free + sum((job.holds for job in running if job.pausing), Resources())
    pool = [job for job in running if job.checkpointable and not job.pausing]
    decided: list[Preemption] = []
    for job in waiting:
        if job.needs.fits_in(soon):
            soon = soon - job.needs  # it starts once the pauses asked for have landed
            continue
        chosen = fewest([r for r in pool if r.rank < job.rank], job.needs - soon)
        if chosen is None:
            break  # it waits for jobs to end; nothing behind it is helped past it
        for victim in chosen:
            pool.remove(victim)
            why = (
                f"preempted by {job.id} ({job.cls or job.rank}, needs {job.needs}; "
                f"{soon} free): {victim.id} ({victim.cls or victim.rank}) holds {victim.holds}"
            )
            decided.append(Preemption(victim.id, job.id, why))
        soon = soon + sum((v.holds for v in chosen), Resources()) - job.needs
    return decided
