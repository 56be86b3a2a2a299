"""Priorities in the queue and preemption through the reconciler (issue 47 item 2), Ray
stubbed at the backend: a run's side of a pause is the result.json the runner writes when
the loop stopped on a request (tests/unit/test_pause.py does the same for an owner's
pause; tests/e2e/test_pause_e2e.py runs it all on `numtune up`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.records.models import PAUSE_REQUEST, RunResult
from jobs.records.run_files import RunFiles
from service.queue.admission import Resources
from service.store.pauses import PauseStore
from tests.support.admission import H, job, make_client, post, reconcile, record, sweep
from tests.support.bench import load
from tests.support.stub_backend import StubBackend


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend(total=Resources(2.0))


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    yield from make_client(tmp_path, backend, storage=str(tmp_path / "storage"))


def stepped(client: TestClient, job_id: str) -> None:
    """Its run has reported a step (the reconciler copies metrics.jsonl): it can pause."""
    client.app.state.services.jobs.set_fields(job_id, metrics_count=1)  # type: ignore[attr-defined]


def events(client: TestClient, job_id: str) -> list[tuple[str, str]]:
    items = client.get(f"/v1/jobs/{job_id}/events", headers=H).json()["items"]
    return [(e["kind"], e["by"]) for e in items]


def pauses(client: TestClient, backend: StubBackend, job_id: str, step: int = 3) -> str:
    """The run saw the request, checkpointed at `step` and ended (its Ray job SUCCEEDED)."""
    storage = client.app.state.services.settings.storage_root  # type: ignore[attr-defined]
    files = RunFiles.for_job(job_id, storage)
    assert files.has(PAUSE_REQUEST)
    checkpoint = f"{files.uri}/train/checkpoint_step_{step:07d}"
    files.write_result(
        RunResult(status="paused", best_checkpoint=checkpoint, metrics={"step": step})
    )
    backend.statuses[job_id] = "SUCCEEDED"
    return checkpoint


def one_cpu(name: str, priority: str, **extra: Any) -> dict[str, Any]:
    return job(name, workers=1, priority=priority, **extra)


def test_a_higher_class_is_admitted_first_and_lower_ones_do_not_take_its_cpus(
    client: TestClient, backend: StubBackend
) -> None:
    low = post(client, job("low", priority="low"))
    normal = post(client, job("normal"))
    urgent = post(client, job("high", priority="high"))
    reconcile(client)
    assert backend.submitted == [urgent]
    assert [record(client, i)["queue_position"] for i in (normal, low)] == [1, 2]
    # A 1-CPU low job would fit the free CPU, but the normal job waits for it.
    small = post(client, one_cpu("small", "low"))
    backend.statuses[urgent] = "STOPPED"
    backend.available = Resources(1.0)  # Ray still counts one CPU held: one free
    reconcile(client)
    assert record(client, small)["waiting_for"].startswith(f"priority: {normal}, of a higher")


def test_low_jobs_are_preempted_for_a_high_one_and_resume_after_it(
    client: TestClient, backend: StubBackend
) -> None:
    lows = [post(client, one_cpu(f"low-{i}", "low")) for i in range(2)]
    reconcile(client)
    reconcile(client)  # running
    assert backend.submitted == lows
    urgent = post(client, job("urgent", priority="high"))
    reconcile(client)
    assert all(record(client, i)["pause_requested_at"] is None for i in lows)  # no step yet
    for i in lows:
        stepped(client, i)
    reconcile(client)
    for i in lows:  # asked, and the request handed to the run in the same pass
        assert record(client, i)["pause_requested_at"] is not None
    assert backend.submitted == lows
    checkpoints = [pauses(client, backend, i) for i in lows]
    reconcile(client)  # both paused and queued again; the urgent job starts in this pass
    assert backend.submitted == [*lows, urgent]
    for i, checkpoint in zip(lows, checkpoints, strict=True):
        again = record(client, i)
        assert again["status"] == "queued" and again["paused_checkpoint"] == checkpoint
        assert events(client, i) == [
            ("preempted", "numtune"),
            ("paused", "numtune"),
            ("resumed", "numtune"),
        ]
    preempting = client.get(f"/v1/jobs/{urgent}/events", headers=H).json()["items"]
    assert [e["kind"] for e in preempting] == ["preempting", "preempting"]
    assert {e["detail"].split(": ")[1].split(" ")[0] for e in preempting} == set(lows)
    assert preempting[0]["detail"].startswith(f"preempted by {urgent} (high, needs 2 CPU")
    backend.statuses[urgent] = "SUCCEEDED"  # it ended (no result: failed, no matter here)
    reconcile(client)
    assert backend.submitted == [*lows, urgent, f"{lows[0]}-p1", f"{lows[1]}-p1"]


def test_never_a_sweep_a_same_class_job_or_more_than_needed(
    client: TestClient, backend: StubBackend
) -> None:
    tune = post(client, sweep("sweep", 0.99, max_concurrent_trials=1))
    normal = post(client, one_cpu("normal", "normal"))
    reconcile(client)
    reconcile(client)
    assert backend.submitted == [tune, normal]
    stepped(client, tune)
    stepped(client, normal)
    one = post(client, one_cpu("one", "high"))
    reconcile(client)
    assert record(client, normal)["pause_requested_at"] is not None  # one CPU: one job
    assert record(client, tune)["pause_requested_at"] is None  # a sweep cannot pause
    same = post(client, one_cpu("same", "normal"))
    reconcile(client)
    assert record(client, tune)["pause_requested_at"] is None
    assert events(client, one) == [("preempting", "numtune")]
    assert record(client, same)["status"] == "queued"


def test_no_preemption_for_cpus_only_rays_late_report_holds(
    client: TestClient, backend: StubBackend
) -> None:
    low = post(client, one_cpu("low", "low"))
    reconcile(client)
    reconcile(client)
    stepped(client, low)
    backend.available = Resources(0.0)  # Ray still counts a job that just ended
    urgent = post(client, one_cpu("urgent", "high"))
    reconcile(client)
    assert record(client, urgent)["waiting_for"].startswith("resources: needs 1 CPU, 0 CPU")
    assert record(client, low)["pause_requested_at"] is None  # by our count one CPU is free
    assert events(client, urgent) == []


def preempting(client: TestClient) -> str:
    """A low job that has run a step, and a high one that asks for its CPUs: the pass
    after this asks the low one to pause."""
    low = post(client, job("low", priority="low"))
    reconcile(client)
    reconcile(client)
    stepped(client, low)
    post(client, job("urgent", priority="high"))
    reconcile(client)
    return low


def test_an_owner_who_pauses_a_preempted_job_keeps_it_paused(
    client: TestClient, backend: StubBackend
) -> None:
    low = preempting(client)
    assert client.post(f"/v1/jobs/{low}/pause", headers=H).status_code == 200
    reconcile(client)
    pauses(client, backend, low)
    reconcile(client)
    assert record(client, low)["status"] == "paused"  # not back in the queue by itself
    assert events(client, low) == [
        ("preempted", "numtune"),
        ("pause_requested", "admin"),
        ("paused", "numtune"),
    ]


def test_the_queue_bench_plans_preemptions_in_a_pass_with_quotas(tmp_path: Path) -> None:
    """bench/queue_scale.py's pass with quotas, classes and the planner, at 400 jobs, and
    the planner alone at its worst (every running job pausable, every queued one waiting)."""
    out = load("queue_scale").measure_quotas(400, 5, tmp_path)
    assert out["classes"] == {"low": 240, "normal": 120, "high": 40}
    assert out["preemptions"] >= out["preempting_jobs"] >= 1
    assert out["waiting_for_resources"] >= out["preempting_jobs"]
    alone = load("queue_preemption").planner_at_scale(300, 300)
    assert 0 < alone["helped"] <= alone["preemptions"] <= 300 - 30  # never a pausing one


def test_an_owner_pause_that_crosses_the_schedulers_requeue_still_holds_the_job(
    client: TestClient, backend: StubBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    low = preempting(client)
    pauses(client, backend, low)
    noted = PauseStore.note

    def requeued_then_noted(store: PauseStore, *args: Any) -> None:
        reconcile(client)  # the owner read it pausing; the scheduler queues it again now
        noted(store, *args)

    monkeypatch.setattr(PauseStore, "note", requeued_then_noted)
    assert client.post(f"/v1/jobs/{low}/pause", headers=H).json()["status"] == "paused"
    assert events(client, low) == [
        ("preempted", "numtune"),
        ("paused", "numtune"),
        ("resumed", "numtune"),
        ("pause_requested", "admin"),
        ("paused", "admin"),  # held in the queue by the owner's ask
    ]


def test_a_coarse_day_with_classes_preempts_low_jobs_and_starts_every_job() -> None:
    day = load("queue_day").simulate(tick_s=1800.0, priorities=True)
    assert day["left_queued"] == 0 and day["preemptions"] > 0
    waits = day["wait_by_class"]
    assert {name: w["jobs"] for name, w in waits.items()} == {"high": 41, "low": 540, "normal": 319}
    assert waits["low"]["median_s"] > 10 * max(
        waits["high"]["median_s"], waits["normal"]["median_s"]
    )
