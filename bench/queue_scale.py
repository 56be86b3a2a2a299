"""The queue at scale: one reconcile pass and one admission plan over thousands of queued
and running jobs, with Ray stubbed at the backend boundary (tests/support/stub_backend.py)
and a real SQLite database; the goal is ≤ 5 s each for 10,000 jobs on 2 cores, and
database rows read per pass that grow with the jobs, not with their logs.

    python -m bench.queue_scale                    # 1,000, 3,000 and 10,000 jobs
    python -m bench.queue_scale --sizes 200 --out /tmp/q.json

Writes bench/results/queue_scale.json and .png. Rows read are counted where they are
loaded: every job row built from the database (ORM loads and `JobStore.get`'s Core rows)
and every metrics and log row fetched; statements are counted at the engine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event, insert

from bench.queue_day import simulate
from bench.queue_preemption import planner_at_scale
from bench.queue_scale_plot import GOAL_S, plot
from jobs.spec import JobSpec
from service.jobs.reconciler import Reconciler
from service.queue.admission import Capacity, Policy, Resources, need, plan
from service.queue.preempting import preemption_plan
from service.queue.quotas import QuotaLimit, Quotas
from service.queue.usage import by_account, in_window, quota_usage
from service.store import Database, JobStore, migrate
from service.store.job_rows import spec_digest
from service.store.schema import JobRow
from tests.support.stub_backend import StubBackend

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def fill(
    db: Database, jobs: int, running_share: float, owners: int, classes: tuple[str, ...] = ()
) -> None:
    """`jobs` rows, the first `running_share` of them running, the rest queued; specs
    of a few shapes (1-2 workers, 0.25-1 CPU) as users send them. With `classes`, job i
    asks for priority classes[i % len] and the running ones have reported a step (they
    can be preempted)."""
    start = datetime.now(UTC) - timedelta(hours=1)
    rows = []
    for i in range(jobs):
        spec = JobSpec.model_validate(
            {
                "name": f"j{i}",
                "model": {"source": "random:tiny-digit"},
                "scaling": {"num_workers": 1 + i % 2, "cpus_per_worker": (0.25, 0.5, 1.0)[i % 3]},
            }
        ).model_dump(mode="json")
        if classes:
            spec["priority"] = classes[i * 7 % len(classes)]  # 7: no lockstep with shapes
        running = i < jobs * running_share
        stamp = start + timedelta(milliseconds=i)
        rows.append(
            {
                "id": f"job-{i:016x}",
                "kind": "job",
                "name": f"j{i}",
                "owner": f"owner{i % owners}",
                "spec_json": spec,
                "spec_sha256": spec_digest("job", spec),
                "status": "running" if running else "queued",
                "ray_status": "RUNNING" if running else None,
                "version": 0,
                "created_at": stamp,
                "updated_at": stamp,
                "started_at": stamp if running else None,
                "submitted_at": stamp if running else None,
                "metrics_count": 1 if classes and running else 0,
                "log_chars": 0,
                "submit_attempts": 0,
                "start_retries": 0,
                "registration_attempts": 0,
            }
        )
    with db.session() as s:
        s.execute(insert(JobRow), rows)


class Reads:
    """Rows loaded from the database and statements sent, between two reset() calls."""

    def __init__(self, db: Database, store: JobStore):
        self.rows = 0
        self.statements = 0
        event.listen(JobRow, "load", self._loaded)
        event.listen(db.engine, "after_cursor_execute", self._executed)
        real_get = store.get

        def get(job_id: str, owner: str | None = None) -> JobRow | None:
            found = real_get(job_id, owner)
            self.rows += found is not None
            return found

        store.get = get  # type: ignore[method-assign]

    def _loaded(self, *_: Any) -> None:
        self.rows += 1

    def _executed(self, *_: Any) -> None:
        self.statements += 1

    def reset(self) -> tuple[int, int]:
        seen = (self.rows, self.statements)
        self.rows = self.statements = 0
        return seen


def measure(jobs: int, running_share: float, owners: int, home: Path) -> dict[str, Any]:
    db = Database(f"sqlite:///{home / f'queue-{jobs}.db'}")
    migrate(db.engine)
    fill(db, jobs, running_share, owners)
    store = JobStore(db)
    # A cluster the running jobs fit on, with 2 CPUs free at the first pass.
    cluster = Resources(float(jobs))
    backend = StubBackend(total=cluster, available=Resources(2.0))
    reconciler = Reconciler(store, backend, str(home / "storage"), policy=Policy())
    reads = Reads(db, store)
    out: dict[str, Any] = {"jobs": jobs, "running": int(jobs * running_share), "passes": []}
    for n in range(3):  # the first pass writes every queued job's place; later ones not
        reads.reset()
        began, cpu = time.perf_counter(), time.process_time()
        reconciler.run_once()
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
        rows, statements = reads.reset()
        out["passes"].append({"pass": n + 1, "seconds": seconds, "cpu_seconds": cpu,
                              "rows_read": rows, "statements": statements})  # fmt: skip
        # Ray's report once the jobs handed to it hold their CPUs: the cluster is full.
        backend.available = Resources(0.0)
    active = store.active()
    queued = [r for r in active if r.status == "queued"]
    running = [r for r in active if r.status != "queued"]
    capacity = Capacity(cluster, Resources(0.0))
    began, cpu = time.perf_counter(), time.process_time()
    decisions = plan(queued, running, capacity, served=Counter(), policy=Policy())
    out["plan_seconds"] = time.perf_counter() - began
    out["plan_cpu_seconds"] = time.process_time() - cpu
    out["plan_decisions"] = Counter(d.action for d in decisions)
    out["submitted"] = len(backend.submitted)  # all in the first pass
    db.dispose()
    return out


def quota_held(why: str | None) -> bool:
    return (why or "").startswith("quota:")


# Of ten jobs, running and queued alike: six low, three normal, one high.
CLASSES = ("low",) * 6 + ("normal",) * 3 + ("high",)


def measure_quotas(jobs: int, owners: int, home: Path) -> dict[str, Any]:
    """One admission pass with compute quotas, priority classes and the preemption planner
    over `jobs` (half running for the last hour, half queued) of `owners`: the usage read
    and summed (service/queue/usage.py), the plan, then which running jobs to pause for the
    higher-class jobs that wait for resources (service/queue/preempting.py's plan, no writes).
    Each owner's quota is the median owner's usage, so about half of them are held."""
    db = Database(f"sqlite:///{home / f'quota-{jobs}.db'}")
    migrate(db.engine)
    fill(db, jobs, 0.5, owners, CLASSES)
    store = JobStore(db)
    cluster = Resources(float(jobs))
    used = by_account(in_window(db, 86_400.0, cluster), Quotas())
    limit = statistics.median(u.cpu_seconds for u in used.values())
    quotas = Quotas(window_s=86_400.0, default=QuotaLimit(cpu_seconds=limit))
    policy = Policy(quotas=quotas)
    active = store.active()
    queued = [r for r in active if r.status == "queued"]
    running = [r for r in active if r.status != "queued"]
    # A cluster the running jobs fill but for 2 CPUs, as Ray and our own count both say.
    held = sum((need(r.spec).held(cluster) for r in running), Resources())
    capacity = Capacity(held + Resources(2.0), Resources(2.0))
    served = store.submitted_since(min(r.created_at for r in queued))
    passes = []
    for _ in range(2):  # the first decodes each spec once (admission's cache); then steady
        began, cpu = time.perf_counter(), time.process_time()
        usage = quota_usage(db, policy, capacity)
        read = time.perf_counter() - began
        decisions = plan(queued, running, capacity, served=served, policy=policy, usage=usage)
        planned = time.perf_counter()
        preemptions = preemption_plan(decisions, running, capacity, policy)
        passes.append((read, time.perf_counter() - planned, time.perf_counter() - began,
                       time.process_time() - cpu))  # fmt: skip
    (_, _, first, first_cpu), (read, preempting, seconds, cpu) = passes
    out = {
        "jobs": jobs,
        "owners": owners,
        "classes": dict(Counter(CLASSES[i * 7 % len(CLASSES)] for i in range(jobs))),
        "first_pass_seconds": first,
        "first_pass_cpu_seconds": first_cpu,
        "usage_seconds": read,
        "preemption_seconds": preempting,
        "pass_seconds": seconds,
        "pass_cpu_seconds": cpu,
        "waiting_for_resources": sum(d.needs is not None for d in decisions),
        "preemptions": len(preemptions),
        "preempting_jobs": len({p.for_job for p in preemptions}),
        "owners_over_quota": len({d.job.owner for d in decisions if quota_held(d.why)}),
        "decisions": Counter(d.action for d in decisions),
    }
    db.dispose()
    return out


def run(sizes: list[int], running_share: float, owners: int) -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    result: dict[str, Any] = {
        "goal_seconds": GOAL_S,
        "running_share": running_share,
        "owners": owners,
        "commit": commit or "unknown",
        "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
        "load_average_1": os.getloadavg()[0],
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="queue-scale-") as home:
        for jobs in sizes:
            result["runs"].append(measure(jobs, running_share, owners, Path(home)))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 3_000, 10_000])
    parser.add_argument("--running-share", type=float, default=0.5)
    parser.add_argument("--owners", type=int, default=20)
    parser.add_argument("--quota-jobs", type=int, default=10_000)
    parser.add_argument("--quota-owners", type=int, default=50)
    parser.add_argument("--out", type=Path, default=RESULTS / "queue_scale.json")
    args = parser.parse_args()
    result = run(args.sizes, args.running_share, args.owners)
    with tempfile.TemporaryDirectory(prefix="queue-quota-") as home:
        result["quotas"] = measure_quotas(args.quota_jobs, args.quota_owners, Path(home))
    result["preemption_planner"] = planner_at_scale()
    result["day"] = simulate()
    result["day_priorities"] = simulate(priorities=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out.with_suffix(".png"))
    for r in result["runs"]:
        steady = r["passes"][-1]
        print(
            f"{r['jobs']:>6} jobs: pass 1 {r['passes'][0]['seconds']:.2f} s, steady pass "
            f"{steady['seconds']:.2f} s (CPU {steady['cpu_seconds']:.2f} s; "
            f"{steady['rows_read']} rows, {steady['statements']} statements), plan "
            f"{r['plan_seconds']:.2f} s (CPU {r['plan_cpu_seconds']:.2f} s)"
        )
    q, day, pp = result["quotas"], result["day"], result["preemption_planner"]
    ranked = result["day_priorities"]
    print(
        f"quotas and priorities, {q['jobs']} jobs of {q['owners']} owners: usage "
        f"{q['usage_seconds']:.2f} s, usage + plan + preemption {q['pass_seconds']:.2f} s "
        f"(preemption {q['preemption_seconds']:.2f} s: {q['preemptions']} pauses for "
        f"{q['preempting_jobs']} jobs); {q['owners_over_quota']} owners held; first pass "
        f"{q['first_pass_seconds']:.2f} s"
    )
    print(
        f"preemption planner alone, {pp['running']} running and {pp['waiting']} waiting: "
        f"{pp['seconds']:.2f} s (CPU {pp['cpu_seconds']:.2f} s), {pp['preemptions']} pauses "
        f"for {pp['helped']} jobs"
    )
    print(
        f"a day, {day['owners']} owners: starved {day['starved'] or 'none'}; longest front "
        f"wait {day['longest_front_wait_s'] / 60:.0f} min; light owners' longest wait "
        f"{day['light_max_wait_s'] / 60:.0f} min"
    )
    by_class = ", ".join(
        f"{name} median {w['median_s'] / 60:.0f} min (max {w['max_s'] / 3600:.1f} h)"
        for name, w in ranked["wait_by_class"].items()
    )
    print(
        f"the day with classes: {ranked['preemptions']} preemptions; waits {by_class}; "
        f"starved {ranked['starved'] or 'none'}"
    )


if __name__ == "__main__":
    main()
