"""bench/queue_day.py (issue 47 item 5) at a coarse step: the simulated day runs the real
admission plan with quotas over every job, and the quotas are what hold the heavy owners.
The committed figures (bench/results/queue_scale.json) come from the 2-minute step."""

from __future__ import annotations

from tests.support.bench import load


def test_a_coarse_simulated_day_starts_every_job_and_quotas_hold_the_heavy_owners() -> None:
    day = load("queue_day").simulate(tick_s=1800.0)
    owners = day["per_owner"]
    assert len(owners) == 50 and day["left_queued"] == 0
    assert sum(o["started"] for o in owners) == 5 * 108 + 45 * 8  # every job started
    heavy = [o for o in owners if o["heavy"]]
    light = [o for o in owners if not o["heavy"]]
    assert all(o["passes_held_by_quota"] > 0 for o in heavy)
    assert sum(o["passes_held_by_quota"] for o in light) < min(
        o["passes_held_by_quota"] for o in heavy
    )
    assert max(o["median_wait_s"] for o in light) < min(o["median_wait_s"] for o in heavy)
