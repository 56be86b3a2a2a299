"""Issue 13 item 0, end to end: on `numtune up` (3 logical CPUs, one held by the serving
replica), three jobs that each need 2 CPUs queue and run one at a time, and all three
succeed; a job bigger than the whole cluster fails at once with `does_not_fit`.

Before admission, the second and third job went to Ray at once and failed after ~4.5
minutes with `insufficient_resources` (their worker groups never started)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.conftest import Numtune, tiny_job

pytestmark = [pytest.mark.ray, pytest.mark.slow]
TIMEOUT_S = 900  # three runs one after another on 2 shared cores


def two_cpu_job(name: str) -> dict[str, Any]:
    spec = tiny_job(name, steps=8)
    spec["scaling"] = {"num_workers": 1, "cpus_per_worker": 2}
    return spec


def test_three_jobs_that_fit_one_at_a_time_all_succeed(shared_numtune: Numtune) -> None:
    with shared_numtune.http() as http:
        ids = []
        for i in range(3):
            r = http.post("/v1/jobs", json=two_cpu_job(f"queued-{i}"))
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])
        big = two_cpu_job("too-big")
        big["scaling"] = {"num_workers": 2, "cpus_per_worker": 2}  # 4 CPUs of 3
        too_big = http.post("/v1/jobs", json=big).json()["id"]

        seen_waiting: dict[str, set[str]] = {}
        most_at_once = 0
        refused_before_any_finished = None
        listed = None
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            jobs = {i: http.get(f"/v1/jobs/{i}").json() for i in [*ids, too_big]}
            statuses = [jobs[i]["status"] for i in ids]
            most_at_once = max(most_at_once, sum(s in ("submitted", "running") for s in statuses))
            for i in ids:
                if jobs[i]["status"] == "queued" and jobs[i]["waiting_for"]:
                    seen_waiting.setdefault(i, set()).add(jobs[i]["waiting_for"])
            if refused_before_any_finished is None and jobs[too_big]["status"] == "failed":
                refused_before_any_finished = "succeeded" not in statuses
            if all(s in ("succeeded", "failed", "cancelled") for s in statuses):
                break
            assert time.monotonic() < deadline, f"not all ended: {jobs}"
            if listed is None and set(ids[1:]) <= set(seen_waiting) and "queued" in statuses:
                listed = shared_numtune.cli("list", "--status", "queued")  # what a user sees
                assert "waiting for" in listed.stdout, listed.stdout + listed.stderr
            time.sleep(1)

        for i in ids:
            done = jobs[i]
            assert done["status"] == "succeeded", done
            assert done["queue_position"] is None and done["waiting_for"] is None
        assert most_at_once == 1
        # The second and third job were seen waiting, saying for what.
        assert set(ids[1:]) <= set(seen_waiting), seen_waiting
        assert any("resources: needs 2 CPU" in why for why in seen_waiting[ids[1]])
        refused = jobs[too_big]
        assert refused["status"] == "failed" and refused["reason"] == "does_not_fit", refused
        assert (
            "need 4 CPU but jobs get 2 CPU of the cluster's 3 CPU (1 CPU kept for serving)"
            in (refused["detail"])
        )
        assert refused_before_any_finished is True
        assert listed is not None
