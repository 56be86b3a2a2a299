"""The files passed between service/ and jobs/ go through one typed record each
(jobs/records/models.py): what is written is what is read back, and a file that is not a record
ends the job with a reason instead of stalling the reconciler."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from jobs.records.models import RESULT, MetricsRow, Reason, RunResult, TrialRow, TuneResult
from jobs.records.run_files import RunFiles
from jobs.train.steplog import StepLog
from service.app import create_app
from service.jobs import states
from service.jobs.reconciler import Reconciler
from service.settings import Settings
from tests.support.stub_backend import StubBackend

ADMIN = "adm_Re4kWq8Nz1Vx6Bt3Yp9Lc2Hs7Dm5Gf0J"
H = {"Authorization": f"Bearer {ADMIN}"}


def test_a_result_round_trips_with_its_nan_metrics(tmp_path: Path) -> None:
    files = RunFiles.for_job("job-1", str(tmp_path))
    assert files.read_result(RunResult) is None  # not ended yet
    written = RunResult(
        status="succeeded", best_checkpoint="/c/1", metrics={"eval_mae": math.nan, "step": 4}
    )
    files.write_result(written)
    back = files.read_result(RunResult)
    assert back is not None and back.best_checkpoint == "/c/1"
    assert math.isnan(back.metrics["eval_mae"]) and back.metrics["step"] == 4
    # json.dumps writes NaN as the job always did (not null), so the metric stays a number.
    assert "NaN" in (files.read_text(RESULT) or "")


def test_a_sweep_result_keeps_its_trial_fields(tmp_path: Path) -> None:
    files = RunFiles.for_job("sweep-1", str(tmp_path))
    files.write_result(
        TuneResult(status="succeeded", best_trial="t1", best_config={"weight": 0.3}, trials=4)
    )
    back = files.read_result(TuneResult)
    assert back is not None and (back.best_trial, back.best_config, back.trials) == (
        "t1",
        {"weight": 0.3},
        4,
    )


def test_a_failed_result_names_its_reason() -> None:
    failed = TuneResult.failed("does_not_fit", "one trial needs 6 CPUs")
    assert isinstance(failed, TuneResult)
    assert (failed.status, failed.reason, failed.best_checkpoint) == (
        "failed",
        "does_not_fit",
        None,
    )
    with pytest.raises(ValidationError):
        RunResult.model_validate({"status": "failed", "reason": "a code nobody knows"})


def test_metrics_rows_are_written_with_the_keys_they_came_with(tmp_path: Path) -> None:
    files = RunFiles.for_job("job-m", str(tmp_path))
    steplog = StepLog(files)
    steplog.put({"step": 1, "loss": 2.5})
    steplog.flush()
    rows = files.read_metrics()
    assert [r.as_dict() for r in rows] == [{"step": 1, "loss": 2.5}]  # no checkpoint: None
    files.append_text("metrics.jsonl", '{"step": 2, "lo')  # a line still being written
    assert len(files.read_metrics()) == 1
    with pytest.raises(ValidationError):
        MetricsRow.model_validate({"loss": 1.0})  # every report names its step


def test_trials_round_trip(tmp_path: Path) -> None:
    files = RunFiles.for_job("sweep-t", str(tmp_path))
    assert files.read_trials() is None
    row = TrialRow(
        trial_id="a",
        config={"bandwidth": 2.0},
        best_metric=0.5,
        best_checkpoint="/t/a",
        last_step=8,
        status="stopped_early",
    )
    files.write_trials([row])
    assert files.read_trials() == [row]
    assert json.loads(files.read_text("trials.json") or "")[0]["status"] == "stopped_early"


def test_every_reason_the_job_writes_is_a_reason_the_service_knows() -> None:
    service_codes = set(get_args(states.ServiceReason))
    assert set(get_args(Reason)) | service_codes == {
        code for part in get_args(states.JobReason) for code in get_args(part)
    }
    assert not set(get_args(Reason)) & service_codes  # each code has one author


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path, admin_token=ADMIN, reconcile_interval_s=0.001)
    backend = StubBackend()
    with TestClient(create_app(settings, backend=backend, reconcile=False)) as c:
        c.backend = backend  # type: ignore[attr-defined]
        yield c


def test_a_result_file_that_is_not_a_record_fails_the_job_with_a_reason(
    client: TestClient,
) -> None:
    r = client.post("/v1/jobs", json={"name": "tiny"}, headers=H)
    job_id = r.json()["id"]
    reconciler: Reconciler = client.app.state.reconciler  # type: ignore[attr-defined]
    reconciler.run_once()
    storage = client.app.state.services.settings.storage_root  # type: ignore[attr-defined]
    RunFiles.for_job(job_id, storage).write_text(RESULT, json.dumps({"status": "maybe"}))
    client.backend.statuses[job_id] = "SUCCEEDED"  # type: ignore[attr-defined]
    for _ in range(200):  # a failed pass backs off: a few passes, a little apart
        reconciler.run_once()
        job = client.get(f"/v1/jobs/{job_id}", headers=H).json()
        if job["status"] != "submitted":
            break
        time.sleep(0.002)
    assert (job["status"], job["reason"]) == ("failed", "no_result")
    assert "not a RunResult" in job["detail"]
