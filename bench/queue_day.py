"""A simulated day of submissions through numtune's admission (service/queue/admission.py's plan,
with owner shares and compute quotas, service/queue/usage.py's accounting): is any owner starved?

Nothing runs: a virtual clock moves in steps of one reconcile interval scaled up (`tick_s`),
jobs end when their drawn duration is over, and each step runs the real admission plan
over the real job rows (in memory) with usage counted as the service counts it. 50 owners:
5 heavy ones submit 60 % of the jobs (a sweep-happy team), 45 light ones the rest; the
cluster is oversubscribed about 1.5× over the day, so the heavy owners' backlog grows.

An owner is starved when they submitted jobs of which none started, or when their front job
(the first of theirs in the fair order) waited longer than `STARVED_S` for other owners'
jobs: time held by their own quota, share or running limit is the policy working, and their
later jobs wait behind their own backlog, so neither counts.

With `priorities=True` the same day has priority classes: the heavy owners' jobs are `low`
(batch sweeps), a tenth of the light owners' `high`, the rest `normal`; admission orders by
class and the preemption plan (service/queue/preempting.py) pauses lower-class running jobs for a
waiting higher-class one. A paused job is queued again at once with what it had left to
run (a pause here costs no time: a real one ends at the next step boundary).

    python -m bench.queue_day         # prints the summary; queue_scale.py stores it
"""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from jobs.spec import JobSpec  # noqa: E402
from service.queue.admission import Capacity, Policy, Resources, plan  # noqa: E402
from service.queue.preempting import Preemption, preemption_plan  # noqa: E402
from service.queue.quotas import QuotaLimit, Quotas  # noqa: E402
from service.queue.usage import by_account, job_usage  # noqa: E402
from service.store.job_rows import new_job  # noqa: E402
from service.store.schema import JobRow  # noqa: E402

DAY_S = 86_400
STARVED_S = 4 * 3600.0
CPUS = 32.0
OWNERS = 50
HEAVY = 5
# Waits an owner's own bounds impose (their quota, share, running limit): the policy at work.
OWN_LIMITS = ("quota:", "owner share:", "owner limit:")
SHAPES = ((1, 1.0), (2, 1.0), (4, 1.0), (2, 0.5))  # (workers, CPUs each)


def specs(priority: str | None = None) -> list[JobSpec]:
    return [
        JobSpec.model_validate(
            {
                "name": "sim",
                "model": {"source": "random:tiny-digit"},
                "scaling": {"num_workers": w, "cpus_per_worker": c},
                "priority": priority,
            }
        )
        for w, c in SHAPES
    ]


def arrivals(rng: random.Random, start: datetime) -> list[tuple[datetime, str, int, float]]:
    """(when, owner, shape, duration s) for the day: ~900 jobs of ~30 min mean."""
    out = []
    for k in range(OWNERS):
        per_day = 108 if k < HEAVY else 8  # 540 heavy + 360 light
        for _ in range(per_day):
            when = start + timedelta(seconds=rng.uniform(0, DAY_S))
            duration = min(4 * 3600.0, max(120.0, rng.expovariate(1 / 1800)))
            out.append((when, f"owner{k:02d}", rng.randrange(len(SHAPES)), duration))
    return sorted(out)


def served(starts: list[tuple[datetime, str]], queued: list[JobRow]) -> Counter[str]:
    """Jobs started per owner since the oldest queued one came (the reconciler's count)."""
    if not queued:
        return Counter()
    oldest = min(r.created_at for r in queued)
    return Counter(owner for when, owner in starts if when >= oldest)


def arrive(
    pending: list[tuple[datetime, str, int, float]],
    now: datetime,
    classes: random.Random,
    shapes: dict[str, list[JobSpec]],
    steps: int,
    queued: list[JobRow],
) -> None:
    """Queue every job that has arrived by `now`, its priority class drawn from `classes`."""
    while pending and pending[0][0] <= now:
        when, owner, shape, duration = pending.pop(0)
        heavy = int(owner.removeprefix("owner")) < HEAVY
        level = "low" if heavy else "high" if classes.random() < 0.1 else "normal"
        row = new_job(kind="job", name="sim", owner=owner, spec=shapes[level][shape])
        row.id = f"job-{steps:08x}{len(queued):08x}"  # not random: ties break the same
        row.created_at, row.meta = when, {"duration": duration}
        queued.append(row)


def preempt(
    chosen: list[Preemption],
    running: dict[str, tuple[JobRow, datetime]],
    queued: list[JobRow],
    now: datetime,
) -> int:
    """Pause the planned victims at once and queue them again with the time they have left."""
    for victim in chosen:
        row, ends = running.pop(victim.victim)
        run_s = (now - (row.started_at or now)).total_seconds()
        row.ran_seconds = (row.ran_seconds or 0.0) + run_s
        row.ran_until, row.started_at, row.status = now, None, "queued"
        row.meta = {**(row.meta or {}), "duration": (ends - now).total_seconds()}
        queued.append(row)
    return len(chosen)


def simulate(tick_s: float = 120.0, seed: int = 0, priorities: bool = False) -> dict[str, Any]:
    rng = random.Random(seed)
    classes = random.Random(seed + 1)  # its own draws: the day's arrivals stay the same
    start = datetime(2026, 11, 27, tzinfo=UTC)
    shapes = {name: specs(name if priorities else None) for name in ("low", "normal", "high")}
    pending = arrivals(rng, start)
    window = 6 * 3600.0
    # Each owner's quota: twice an equal share of the cluster over the window.
    quotas = Quotas(window_s=window, default=QuotaLimit(cpu_seconds=2 * CPUS * window / OWNERS))
    policy = Policy(reserved=Resources(), aging_s=1800.0, quotas=quotas)
    queued: list[JobRow] = []
    running: dict[str, tuple[JobRow, datetime]] = {}  # id -> (row, ends at)
    done: list[JobRow] = []
    waits: dict[str, list[float]] = {f"owner{k:02d}": [] for k in range(OWNERS)}
    held_by_quota: Counter[str] = Counter()  # owner -> passes a quota held their jobs
    oldest: defaultdict[str, float] = defaultdict(float)  # owner -> longest front wait
    behind: defaultdict[str, float] = defaultdict(float)  # job id -> its wait for others
    starts: list[tuple[datetime, str]] = []  # (when, owner): fairness counts recent turns
    pass_seconds: list[float] = []
    by_class: defaultdict[str, list[float]] = defaultdict(list)  # class -> first-start waits
    preempted = 0
    now, steps = start, 0
    while now < start + timedelta(seconds=DAY_S) or queued or running:
        arrive(pending, now, classes, shapes, steps, queued)
        for job_id, (row, ends) in list(running.items()):
            if ends <= now:
                row.finished_at, row.status = ends, "succeeded"
                done.append(running.pop(job_id)[0])
        since = now - timedelta(seconds=window)
        done = [r for r in done if r.finished_at is not None and r.finished_at >= since]
        began = time.perf_counter()
        rows = [*done, *(r for r, _ in running.values()), *(r for r in queued if r.ran_seconds)]
        ran = [job_usage(r, since, now, None) for r in rows]
        usage = by_account(ran, quotas)
        active = [r for r, _ in running.values()]
        capacity = Capacity(Resources(CPUS), Resources(CPUS))
        decisions = plan(
            queued, active, capacity, served=served(starts, queued), policy=policy, now=now,
            usage=usage,
        )  # fmt: skip
        pass_seconds.append(time.perf_counter() - began)
        started, fronts = set(), set()
        for decision in decisions:
            row = decision.job
            if decision.action == "submit":
                first = not row.ran_seconds  # a preempted job's wait counted once, at first
                row.started_at, row.status, row.metrics_count = now, "running", 1
                ends = now + timedelta(seconds=float((row.meta or {})["duration"]))
                running[row.id] = (row, ends)
                if first:
                    waits[row.owner].append((now - row.created_at).total_seconds())
                    by_class[str(row.spec_json.get("priority"))].append(waits[row.owner][-1])
                started.add(row.id)
                starts.append((now, row.owner))
            elif decision.why and decision.why.startswith(OWN_LIMITS):
                held_by_quota[row.owner] += decision.why.startswith("quota:")
            elif row.owner not in fronts:  # the owner's front job, waiting for others' jobs
                fronts.add(row.owner)  # (their later ones wait behind their own backlog)
                behind[row.id] += tick_s
                oldest[row.owner] = max(oldest[row.owner], behind[row.id])
        queued = [r for r in queued if r.id not in started]
        if priorities:
            preempted += preempt(preemption_plan(decisions, active, capacity, policy), running,
                                 queued, now)  # fmt: skip
        now += timedelta(seconds=tick_s)
        steps += 1
        if now > start + timedelta(seconds=3 * DAY_S):
            break  # the backlog is reported below, not drained for ever
    out = summary(waits, held_by_quota, oldest, queued, pass_seconds, steps, tick_s)
    if priorities:
        out["preemptions"] = preempted
        out["wait_by_class"] = {
            name: {"jobs": len(w), "median_s": statistics.median(w), "max_s": max(w)}
            for name, w in sorted(by_class.items())
        }
    return out


def summary(
    waits: dict[str, list[float]],
    held_by_quota: Counter[str],
    oldest: dict[str, float],
    queued: list[JobRow],
    pass_seconds: list[float],
    steps: int,
    tick_s: float,
) -> dict[str, Any]:
    owners: list[dict[str, Any]] = []
    for owner, seen in sorted(waits.items()):
        heavy = int(owner.removeprefix("owner")) < HEAVY
        owners.append(
            {
                "owner": owner,
                "heavy": heavy,
                "started": len(seen),
                "max_wait_s": max(seen, default=0.0),
                "median_wait_s": statistics.median(seen) if seen else 0.0,
                "passes_held_by_quota": held_by_quota[owner],
                "longest_wait_behind_others_s": oldest.get(owner, 0.0),
            }
        )
    starved = [
        o["owner"]
        for o in owners
        if o["started"] == 0 or o["longest_wait_behind_others_s"] > STARVED_S
    ]
    light = [o for o in owners if not o["heavy"]]
    return {
        "cluster_cpus": CPUS,
        "owners": OWNERS,
        "heavy_owners": HEAVY,
        "tick_s": tick_s,
        "passes": steps,
        "starved_after_s": STARVED_S,
        "starved": sorted(set(starved)),
        "light_max_wait_s": max(o["max_wait_s"] for o in light),
        "heavy_max_wait_s": max(o["max_wait_s"] for o in owners if o["heavy"]),
        "longest_front_wait_s": max(o["longest_wait_behind_others_s"] for o in owners),
        "left_queued": len(queued),
        "plan_pass_max_s": max(pass_seconds),
        "plan_pass_mean_s": statistics.fmean(pass_seconds),
        "per_owner": owners,
    }


if __name__ == "__main__":
    result = simulate()
    print({k: v for k, v in result.items() if k != "per_owner"})
