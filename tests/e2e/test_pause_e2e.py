"""Issue 47 item 1's "Must show", on the shared `numtune up` (3 logical CPUs, one kept for
serving, so one 2-CPU job at a time): a running tiny job paused through the unmodified
`openai` client checkpoints and gives back its CPUs (the job queued behind it starts), is
resumed, and finishes with the same final metrics as that uninterrupted run on the same
seed, bit for bit (CPU, the same thread count)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.e2e.conftest import Numtune, tiny_job, wait_for_job

pytestmark = [pytest.mark.ray, pytest.mark.slow]
# Asked to pause as soon as Ray runs it, the run stops at its first step boundary after its
# workers have started (10 s or more later): well before its last step.
STEPS = 60
NOT_COMPARED = {"step_time_s", "resumed_from", "checkpoint"}  # timings; where it resumed


def two_cpu_job(name: str) -> dict[str, Any]:
    spec = tiny_job(name, steps=STEPS)
    spec["scaling"] = {"num_workers": 1, "cpus_per_worker": 2}
    spec["train"] = {**spec["train"], "seed": 11}
    return spec


def status_is(*statuses: str) -> Any:
    return lambda job: job["status"] in statuses


def post(http: httpx.Client, name: str) -> str:
    r = http.post("/v1/jobs", json=two_cpu_job(name))
    assert r.status_code == 202, r.text
    return str(r.json()["id"])


def test_a_paused_job_frees_its_cpus_and_resumes_to_the_uninterrupted_result(
    shared_numtune: Numtune,
) -> None:
    token = (shared_numtune.home / "admin-token").read_text().strip()
    api = openai.OpenAI(base_url=f"{shared_numtune.url}/v1", api_key=token, max_retries=0)
    with shared_numtune.http() as http:
        paused_id, whole_id = post(http, "pause-me"), post(http, "uninterrupted")
        wait_for_job(http, paused_id, 240, until=status_is("running"))
        assert http.get(f"/v1/jobs/{whole_id}").json()["status"] == "queued"  # no CPUs left

        assert api.fine_tuning.jobs.pause(paused_id).status == "pausing"
        paused = wait_for_job(http, paused_id, 120, until=status_is("paused", "succeeded"))
        assert paused["status"] == "paused", "it finished before the pause reached it"
        assert paused["paused_checkpoint"] and paused["ray_status"] == "SUCCEEDED"
        # Its CPUs are free: the job queued behind it is admitted.
        wait_for_job(http, whole_id, 60, until=status_is("submitted", "running", "succeeded"))
        assert api.fine_tuning.jobs.pause(paused_id).status == "paused"  # idempotent
        assert api.fine_tuning.jobs.resume(paused_id).status == "queued"

        whole = wait_for_job(http, whole_id, 600)
        resumed = wait_for_job(http, paused_id, 600)
        assert whole["status"] == resumed["status"] == "succeeded", (whole, resumed)
        rows = http.get(f"/v1/jobs/{paused_id}/metrics").json()["items"]
        step = next(r["step"] for r in rows if r.get("paused"))
        assert 0 < step < STEPS and rows[-1]["resumed_from"] == step
        expected = {k: v for k, v in whole["final_metrics"].items() if k not in NOT_COMPARED}
        got = {k: v for k, v in resumed["final_metrics"].items() if k not in NOT_COMPARED}
        assert got == expected and "eval_loss" in got

        events = http.get(f"/v1/jobs/{paused_id}/events").json()["items"]
        assert [(e["kind"], e["by"]) for e in events] == [
            ("pause_requested", "admin"),
            ("paused", "numtune"),
            ("resumed", "admin"),
        ]
