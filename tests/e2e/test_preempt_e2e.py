"""Issue 47 item 2's "Must show", on the shared `numtune up` (3 logical CPUs, one kept for
serving: 2 for jobs): two low-priority tiny jobs hold every CPU; a high-priority job is
submitted; both low jobs are asked to pause (preempted), checkpoint at their next step
boundary, and the high job is handed to Ray once the second pause is recorded (in the same
reconciler pass: tests/unit/test_priorities.py); the low jobs go back in the queue by
themselves and, once the high job is done, resume from their checkpoints and succeed.
Events on all three."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Numtune, tiny_job, wait_for_job

pytestmark = [pytest.mark.ray, pytest.mark.slow]
# Preempted once their first step is seen, they stop a few steps later (7 and 16 at load 20):
# well before the last, and little left to run after they resume.
STEPS = 60


def job(name: str, priority: str, steps: int, cpus: int) -> dict[str, Any]:
    spec = tiny_job(name, steps=steps)
    spec["scaling"] = {"num_workers": 1, "cpus_per_worker": cpus}
    spec["calibration"] = {"questions": 0}  # no end-of-job calibration: time
    spec["priority"] = priority
    return spec


def post(http: httpx.Client, spec: dict[str, Any]) -> str:
    r = http.post("/v1/jobs", json=spec)
    assert r.status_code == 202, r.text
    return str(r.json()["id"])


def events(http: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = http.get(f"/v1/jobs/{job_id}/events").json()["items"]
    return items


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_a_high_priority_job_preempts_low_ones_which_resume_and_succeed(
    shared_numtune: Numtune,
) -> None:
    with shared_numtune.http() as http:
        lows = [post(http, job(f"low-{i}", "low", steps=STEPS, cpus=1)) for i in range(2)]
        for low in lows:
            wait_for_job(http, low, 240, until=lambda j: j["status"] == "running")
        urgent = post(http, job("urgent", "high", steps=4, cpus=2))

        started = wait_for_job(http, urgent, 180, until=lambda j: j["submitted_at"] is not None)
        paused = []
        for low in lows:
            kinds = [e["kind"] for e in events(http, low)]
            assert kinds[:3] == ["preempted", "paused", "resumed"], (low, kinds)
            record = http.get(f"/v1/jobs/{low}").json()
            assert record["paused_checkpoint"] and record["resumes"] == 1, record
            paused.append(at(events(http, low)[1]["at"]))
        # Handed to Ray after the last pause was recorded. That it is the same reconciler
        # pass is test_priorities' (one run_once): here the pass's own Ray calls take from
        # 0.1 s to over 2 s by the machine's load, so a time bound cannot tell passes apart.
        assert at(started["submitted_at"]) >= max(paused), (started, paused)

        done = wait_for_job(http, urgent, 300)
        assert done["status"] == "succeeded", done
        mine = events(http, urgent)
        assert [e["kind"] for e in mine] == ["preempting", "preempting"], mine
        assert all(e["detail"].startswith(f"preempted by {urgent} (high") for e in mine)
        for low in lows:
            ended = wait_for_job(http, low, 300)
            assert ended["status"] == "succeeded", ended
            assert at(ended["submitted_at"]) > at(started["submitted_at"])  # after the urgent
            assert ended["final_metrics"]["step"] == STEPS
            rows = http.get(f"/v1/jobs/{low}/metrics").json()["items"]
            step = next(r["step"] for r in rows if r.get("paused"))
            assert 0 < step < STEPS and rows[-1]["resumed_from"] == step
            preempted = events(http, low)[0]
            assert preempted["by"] == "numtune" and urgent in preempted["detail"]
