"""The preemption planner (service/queue/preemption.py) alone at its worst: every queued job
waits for resources and every running one can be paused, so each waiting job of a higher
class than some running ones gets a plan. queue_scale.py stores the result.

    python -m bench.queue_preemption
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from service.queue.preemption import Running, Waiting, plan_preemptions  # noqa: E402
from service.queue.resources import Resources  # noqa: E402

SHAPES = (0.25, 0.5, 1.0, 2.0)  # CPUs a job holds or needs
RANKS = (0,) * 6 + (1,) * 3 + (2,)  # of ten jobs: six low, three normal, one high


def planner_at_scale(running: int = 5_000, waiting: int = 5_000, seed: int = 0) -> dict[str, Any]:
    """One plan over `running` jobs (all checkpointable, a tenth already pausing) and
    `waiting` jobs in admission order (highest class first), nothing free."""
    rng = random.Random(seed)
    jobs = [
        Running(
            f"r{i}",
            rng.choice(RANKS),
            Resources(rng.choice(SHAPES)),
            float(i),
            True,
            pausing=i % 10 == 0,
        )
        for i in range(running)
    ]
    queue = sorted(
        (
            Waiting(f"w{i}", rng.choice(RANKS), Resources(rng.choice(SHAPES)))
            for i in range(waiting)
        ),
        key=lambda w: -w.rank,
    )
    began, cpu = time.perf_counter(), time.process_time()
    plan = plan_preemptions(queue, jobs, Resources())
    return {
        "running": running,
        "waiting": waiting,
        "seconds": time.perf_counter() - began,
        "cpu_seconds": time.process_time() - cpu,
        "preemptions": len(plan),
        "helped": len({p.for_job for p in plan}),
    }


if __name__ == "__main__":
    print(planner_at_scale())
