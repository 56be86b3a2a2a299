"""A run Ray lost with its head (a restart of `numtune up`, a replaced cluster) goes on when it
can: a sweep goes back to the queue (Tune resumes it from its experiment state), so does a job
before step 1; a job part-way through ends `lost`; a run that wrote its result ends by it.
Ray is stubbed at the backend boundary (its 404 for an id it has no record of);
tests/unit/test_ray_backend_rest.py checks that a real 404 is that error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.records.models import MetricsRow, RunResult
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


def test_a_job_lost_before_step_one_is_queued_again_and_one_part_way_through_ends_lost(
    client: TestClient, backend: StubBackend
) -> None:
    fresh = submitted_and_running(client, "/v1/jobs", JOB)
    started = submitted_and_running(client, "/v1/jobs", {**JOB, "name": "started"})
    files(client, started).append_metrics([MetricsRow(step=1, loss=2.0)])
    reconcile(client)  # its first step's metrics are copied
    assert record(client, started)["metrics_count"] == 1
    backend.forgotten |= {fresh, started}
    reconcile(client)
    assert record(client, fresh)["status"] in ("queued", "submitted")
    assert record(client, fresh)["start_retries"] == 1
    lost = record(client, started)
    assert lost["status"] == "failed" and lost["reason"] == "lost"
    assert "it had run steps" in lost["detail"]


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
