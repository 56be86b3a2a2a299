"""A run Ray lost with its head (a restart of `numtune up`, a replaced cluster) goes on: a
sweep goes back to the queue (Tune resumes it from its experiment state), a job too, from its
latest checkpoint with its metrics past it cut (from step 0 without one); a run that wrote its
result ends by it, unless it says only that its workers died (they died with the head). Ray
is stubbed at the backend boundary (its 404 for an id it has no record of;
tests/unit/test_ray_backend_rest.py checks that a real 404 is that error), and so is the
checkpoint record Ray Train writes (tests/e2e/test_up.py loses a real one with its head)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.records.models import MetricsRow, RunResult
from jobs.records.restore import RUN_NAME, SNAPSHOT
from jobs.records.run_files import RunFiles
from tests.support.reconciling import H, hand_reconciled, reconcile, record
from tests.support.stub_backend import StubBackend

JOB: dict[str, Any] = {"name": "tiny", "model": {"source": "random:tiny-digit"}}
TUNE: dict[str, Any] = {
    "name": "sweep",
    "base": {**JOB, "loss": {"name": "smmd"}, "train": {"eval_every": 4}},
    "space": {"bandwidth": {"kind": "choice", "values": [0.5, 1.0]}},
}


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend()


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    with hand_reconciled(tmp_path, backend, start_retries=1) as c:
        yield c


def files(client: TestClient, job_id: str) -> RunFiles:
    storage = client.app.state.services.settings.storage_root  # type: ignore[attr-defined]
    return RunFiles.for_job(job_id, storage)


def submitted_and_running(client: TestClient, path: str, body: dict[str, Any]) -> str:
    job_id = str(client.post(path, json=body, headers=H).json()["id"])
    reconcile(client)  # submitted
    reconcile(client)  # running
    assert record(client, job_id)["status"] == "running"
    return job_id


def test_a_sweep_lost_with_its_head_goes_back_to_the_queue_then_fails_once_retries_are_spent(
    client: TestClient, backend: StubBackend
) -> None:
    tune_id = submitted_and_running(client, "/v1/tunes", TUNE)
    backend.forgotten.add(tune_id)
    reconcile(client)  # back in the queue, and (the cluster is free) submitted afresh at once
    back = record(client, tune_id)
    assert back["status"] in ("queued", "submitted") and back["start_retries"] == 1, back
    assert "its head was replaced" in back["detail"]
    # A fresh submission id: Tune finds its experiment state in the same run folder.
    assert backend.submitted == [tune_id, f"{tune_id}-r1"]
    log = client.get(f"/v1/tunes/{tune_id}/logs", headers=H).text
    assert "[numtune: back in the queue (retry 1 of 1)" in log
    backend.forgotten.add(f"{tune_id}-r1")
    reconcile(client)
    ended = record(client, tune_id)
    assert ended["status"] == "failed" and ended["reason"] == "lost", ended
    assert "after 2 attempts" in ended["detail"]


def ray_record(run: RunFiles, text: str) -> None:
    run.fs.create_dir(f"{run.root}/{RUN_NAME}")
    with run.fs.open_output_stream(f"{run.root}/{RUN_NAME}/{SNAPSHOT}") as out:
        out.write(text.encode())


def checkpointed_at(run: RunFiles, step: int | None) -> None:
    """Ray Train's record of the run's latest checkpoint, as it writes it (its other keys
    left out)."""
    latest = None if step is None else {"metrics": {"step": step, "loss": 1.0}}
    ray_record(run, json.dumps({"latest_checkpoint_result": latest}))


def steps_copied(client: TestClient, job_id: str) -> list[int]:
    rows = client.get(f"/v1/jobs/{job_id}/metrics", headers=H).json()["items"]
    return [row["step"] for row in rows]


def test_a_job_lost_part_way_goes_on_from_its_checkpoint_with_the_metrics_past_it_cut(
    client: TestClient, backend: StubBackend
) -> None:
    fresh = submitted_and_running(client, "/v1/jobs", JOB)
    started = submitted_and_running(client, "/v1/jobs", {**JOB, "name": "started"})
    run = files(client, started)
    # Steps 1-6, with a restart inside the run from step 2's checkpoint after step 4.
    run.append_metrics([MetricsRow(step=s, loss=float(s)) for s in (1, 2, 3, 4, 3, 4, 5, 6)])
    checkpointed_at(run, 4)
    reconcile(client)  # its rows are copied
    assert record(client, started)["metrics_count"] == 8
    run.append_metrics([MetricsRow(step=7, loss=7.0)])  # written, not yet copied
    backend.forgotten |= {fresh, started}
    reconcile(client)
    assert record(client, fresh)["status"] in ("queued", "submitted")
    assert record(client, fresh)["start_retries"] == 1 and steps_copied(client, fresh) == []
    back = record(client, started)
    assert back["status"] in ("queued", "submitted") and back["start_retries"] == 1, back
    assert "it goes on from its checkpoint at step 4" in back["detail"]
    # What the run had written when it was at step 4: the resumed run writes 5 on again.
    assert [row.step for row in run.read_metrics()] == [1, 2, 3, 4, 3, 4]
    assert steps_copied(client, started) == [1, 2, 3, 4, 3, 4]
    assert back["metrics_count"] == 6
    assert f"{started}-r1" in backend.submitted


def test_a_job_lost_before_its_first_checkpoint_starts_again_from_step_0(
    client: TestClient, backend: StubBackend
) -> None:
    job_id = submitted_and_running(client, "/v1/jobs", JOB)
    run = files(client, job_id)
    run.append_metrics([MetricsRow(step=s, loss=1.0) for s in (1, 2)])
    checkpointed_at(run, None)  # Ray's record before any checkpoint
    reconcile(client)
    backend.forgotten.add(job_id)
    reconcile(client)
    back = record(client, job_id)
    assert "it goes on from step 0 (it had no checkpoint yet)" in back["detail"], back
    assert run.read_metrics() == [] and steps_copied(client, job_id) == []


def test_a_job_whose_checkpoint_record_cannot_be_read_ends_lost_with_why(
    client: TestClient, backend: StubBackend
) -> None:
    job_id = submitted_and_running(client, "/v1/jobs", JOB)
    run = files(client, job_id)
    run.append_metrics([MetricsRow(step=1, loss=1.0)])
    ray_record(run, "{not json")
    reconcile(client)
    backend.forgotten.add(job_id)
    reconcile(client)
    ended = record(client, job_id)
    assert ended["status"] == "failed" and ended["reason"] == "lost", ended
    assert "cannot resume" in ended["detail"]
    assert [row.step for row in run.read_metrics()] == [1]  # nothing cut: it does not go on


def test_a_job_that_wrote_its_result_before_the_head_went_ends_by_its_result(
    client: TestClient, backend: StubBackend
) -> None:
    job_id = submitted_and_running(client, "/v1/jobs", JOB)
    files(client, job_id).write_result(RunResult.failed("invalid_data", "row 3: no answer"))
    backend.forgotten.add(job_id)
    reconcile(client)
    ended = record(client, job_id)
    assert ended["status"] == "failed" and ended["reason"] == "invalid_data", ended
    assert ended["start_retries"] == 0


def test_a_job_whose_workers_died_with_the_head_goes_on(
    client: TestClient, backend: StubBackend
) -> None:
    """`numtune down` stops the head before the job's driver, which then writes that its
    workers died: with Ray's record gone too, the job goes on from its checkpoint."""
    job_id = submitted_and_running(client, "/v1/jobs", JOB)
    run = files(client, job_id)
    run.append_metrics([MetricsRow(step=s, loss=1.0) for s in (1, 2, 3)])
    checkpointed_at(run, 2)
    died = "ActorDiedError: The actor died unexpectedly: Owner's node has crashed."
    run.write_result(RunResult.failed("worker_failed", died))
    backend.forgotten.add(job_id)
    reconcile(client)
    back = record(client, job_id)
    assert back["status"] in ("queued", "submitted") and back["start_retries"] == 1, back
    assert "it goes on from its checkpoint at step 2" in back["detail"]
    assert not run.has("result.json") and run.has("result-start-1.json")  # the next writes its own
