"""Pausing and resuming a sweep through the REST API and the CLI (issue 47 item 1), Ray
stubbed at the backend boundary: the run's side is the result.json `jobs.tune.sweep` writes
once every running trial stopped for the pause (tests/integration/test_tune.py runs the
sweep itself: the trials' checkpoints and Tune's restore)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.records.models import PAUSE_REQUEST, TuneResult
from jobs.records.run_files import RunFiles
from tests.support.admission import H, make_client, post, reconcile, record, sweep
from tests.support.cli import Service, cli, service
from tests.support.stub_backend import StubBackend

__all__ = ["cli", "service"]  # the CLI rig's fixtures, from the support package

TUNE = sweep("sweep", cpus=1.0)
# What jobs/tune/sweep.py writes when its trials stopped for a pause.
DETAIL = "1 of 2 trials ended, 1 paused at a step boundary; resuming restores the experiment"


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend()


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    yield from make_client(tmp_path, backend)


def paused_result(files: RunFiles) -> TuneResult:
    experiment = files.sub_uri("tune")
    metrics = {"trials_ended": 1, "trials_paused": 1}
    return TuneResult(
        status="paused", best_checkpoint=experiment, detail=DETAIL, metrics=metrics, trials=2
    )


def test_a_running_sweep_pauses_and_resumes_as_a_new_submission(
    client: TestClient, backend: StubBackend
) -> None:
    tune_id = post(client, TUNE)
    for _ in range(2):  # admitted, then seen running
        reconcile(client)
    assert record(client, tune_id)["status"] == "running"
    assert client.post(f"/v1/jobs/{tune_id}/pause", headers=H).status_code == 404  # not a job

    asked = client.post(f"/v1/tunes/{tune_id}/pause", headers=H)
    assert asked.status_code == 200, asked.text
    assert asked.json()["status"] == "running" and asked.json()["pause_requested_at"]
    again = client.post(f"/v1/tunes/{tune_id}/pause", headers=H)  # idempotent
    assert again.status_code == 200 and again.json() == asked.json()
    early = client.post(f"/v1/tunes/{tune_id}/resume", headers=H)
    assert early.status_code == 409 and "pausing" in early.json()["detail"]

    storage = client.app.state.services.settings.storage_root  # type: ignore[attr-defined]
    files = RunFiles.for_job(tune_id, storage)
    reconcile(client)
    assert files.has(PAUSE_REQUEST)  # in the sweep's folder, where every trial looks
    result = paused_result(files)
    files.write_result(result)
    backend.statuses[tune_id] = "SUCCEEDED"  # the sweep's Ray job ended: its CPUs are free
    reconcile(client)

    paused = record(client, tune_id)
    assert paused["status"] == "paused" and paused["finished_at"] is None
    assert paused["paused_checkpoint"] == result.best_checkpoint  # the experiment state
    assert not files.has(PAUSE_REQUEST) and files.has("result-pause-1.json")
    assert client.post(f"/v1/tunes/{tune_id}/pause", headers=H).json() == paused
    reconcile(client)
    assert backend.submitted == [tune_id]  # a paused sweep is not admitted by itself

    resumed = client.post(f"/v1/tunes/{tune_id}/resume", headers=H)
    assert resumed.status_code == 200 and resumed.json()["status"] == "queued"
    assert resumed.json()["resumes"] == 1
    reconcile(client)
    assert backend.submitted == [tune_id, f"{tune_id}-p1"]  # Tune restores it there

    events = client.get(f"/v1/tunes/{tune_id}/events", headers=H).json()["items"]
    assert [(e["kind"], e["by"]) for e in events] == [
        ("pause_requested", "admin"),
        ("paused", "numtune"),
        ("resumed", "admin"),
    ]
    assert events[1]["detail"] == f"{DETAIL}: {result.best_checkpoint}"


def test_a_queued_sweep_is_held_only_by_its_owner_and_an_ended_one_conflicts(
    client: TestClient, backend: StubBackend
) -> None:
    tune_id = post(client, TUNE)
    r = client.post("/v1/tokens", json={"owner": "bob", "scopes": ["read", "submit"]}, headers=H)
    bob = {"Authorization": f"Bearer {r.json()['token']}"}
    for verb in ("pause", "resume"):
        assert client.post(f"/v1/tunes/{tune_id}/{verb}", headers=bob).status_code == 404
    assert client.get(f"/v1/tunes/{tune_id}/events", headers=bob).status_code == 404
    held = client.post(f"/v1/tunes/{tune_id}/pause", headers=H)
    assert held.status_code == 200 and held.json()["status"] == "paused"
    reconcile(client)
    assert backend.submitted == []  # held: not admitted
    assert client.post(f"/v1/tunes/{tune_id}/resume", headers=H).json()["status"] == "queued"
    assert client.post(f"/v1/tunes/{tune_id}/cancel", headers=H).status_code == 202
    for verb in ("pause", "resume"):
        ended = client.post(f"/v1/tunes/{tune_id}/{verb}", headers=H)
        assert ended.status_code == 409 and "cancelled" in ended.json()["detail"]


def _status(cli: Any, tune_id: str, status: str) -> None:
    deadline = time.monotonic() + 10
    while f"status:         {status}" not in cli("status", tune_id).output:
        assert time.monotonic() < deadline, cli("status", tune_id).output
        time.sleep(0.1)


def test_the_cli_pauses_and_resumes_a_sweep(cli: Any, service: Service, tmp_path: Path) -> None:
    spec = tmp_path / "sweep.json"
    spec.write_text(json.dumps(TUNE))
    submitted = cli("tune", str(spec))
    found = re.search(r"\b(tune-[0-9a-f]{16})\b", submitted.output)
    assert submitted.exit_code == 0 and found, submitted.output
    tune_id = found.group(1)
    _status(cli, tune_id, "running")
    asked = cli("pause", tune_id)
    assert asked.exit_code == 0 and f"{tune_id} pausing (at its next step)" in asked.output
    files = RunFiles.for_job(tune_id, service.backend.storage)
    files.write_result(paused_result(files))
    service.backend.states[tune_id] = "SUCCEEDED"
    _status(cli, tune_id, "paused")
    resumed = cli("resume", tune_id)
    assert resumed.exit_code == 0 and f"{tune_id} queued" in resumed.output
    _status(cli, tune_id, "running")  # as a new Ray submission
    assert service.backend.states[f"{tune_id}-p1"] == "RUNNING"
