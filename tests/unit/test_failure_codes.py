"""Issue 46 item 4: a run's failure code is chosen where it fails, by the class of what was
raised (as Ray Train hands it to the driver: inside WorkerGroupError, ControllerError, or
bare in local mode), written to result.json, and mapped to the API's reason by the
reconciler, which never reads Ray's messages or logs for one."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
import ray.exceptions
import torch
from fastapi.testclient import TestClient
from pydantic import ValidationError
from ray.train import ControllerError, WorkerGroupError
from ray.train.v2._internal.exceptions import WorkerGroupStartupTimeoutError

from jobs.__main__ import main
from jobs.data.types import DataError
from jobs.modeling.folders import ModelNotFoundError
from jobs.records.models import RESULT, FailureCode, Reason, RunResult, TuneResult
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec
from jobs.train import runner
from jobs.train.divergence import DivergedError
from jobs.train.loop_config import LoopConfig, TrackingRef
from jobs.train.worker import PrecisionUnsupportedError
from service.app import create_app
from service.jobs.reconciler import FAILURE_REASONS
from service.queue.admission import Resources
from service.settings import Settings
from tests.support.stub_backend import StubBackend

ADMIN = "adm_Qw3eR5tY7uI9oP1aS2dF4gH6jK8lZ0xC"
H = {"Authorization": f"Bearer {ADMIN}"}
SPEC: dict[str, Any] = {"name": "tiny", "model": {"source": "random:tiny-digit"}}


def invalid_spec() -> ValidationError:
    try:
        JobSpec.model_validate({"name": "j", "train": {"steps": -1}})
    except ValidationError as error:
        return error
    raise AssertionError("the spec validated")


def workers(*failures: BaseException) -> WorkerGroupError:
    """What fit() raises when workers fail: each one's exception by rank."""
    return WorkerGroupError("workers failed", dict(enumerate(failures)))


CASES: list[tuple[BaseException, FailureCode]] = [
    (workers(DataError("data.path: no such file")), FailureCode.INVALID_DATA),
    (DataError("local mode: the loop's own exception"), FailureCode.INVALID_DATA),
    # One worker ran out of memory, its peer then lost the process group: oom.
    (workers(RuntimeError("peer gone"), torch.OutOfMemoryError("CUDA")), FailureCode.OOM),
    (ray.exceptions.OutOfMemoryError("the node ran low on memory"), FailureCode.OOM),
    (ControllerError(WorkerGroupStartupTimeoutError(2)), FailureCode.INSUFFICIENT_RESOURCES),
    (workers(DivergedError("the loss is nan at step 3")), FailureCode.DIVERGED),
    (workers(PrecisionUnsupportedError("bf16")), FailureCode.INVALID_SPEC),
    (invalid_spec(), FailureCode.INVALID_SPEC),
    (workers(ModelNotFoundError("no folder /m")), FailureCode.MODEL_UNAVAILABLE),
    # Names and words in a message are text, not a failure's kind.
    (workers(RuntimeError("OutOfMemory DataError DivergedError")), FailureCode.WORKER_FAILED),
]


class Raising:
    """A trainer whose fit() raises, as Ray Train's does when the run fails."""

    def __init__(self, error: BaseException):
        self.error = error

    def fit(self) -> None:
        raise self.error


@pytest.mark.parametrize(("error", "code"), CASES)
def test_the_runner_writes_the_code_of_what_was_raised(
    error: BaseException, code: FailureCode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "build_trainer", lambda *args, **kwargs: Raising(error))
    result = runner.run_job(JobSpec.model_validate(SPEC), "job-1", str(tmp_path))
    assert (result.status, result.reason) == ("failed", code)
    written = json.loads((tmp_path / "runs" / "job-1" / RESULT).read_text())
    assert written["reason"] == code.value  # result.json keeps the code's name as text


def test_every_code_maps_to_the_reason_of_the_same_name() -> None:
    assert set(FAILURE_REASONS) == set(FailureCode)
    assert sorted(FAILURE_REASONS.values()) == sorted(get_args(Reason))
    for code, reason in FAILURE_REASONS.items():
        assert code.value == reason  # the API's names stay what result.json has always said


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[TestClient, StubBackend, str]]:
    backend = StubBackend(total=Resources(64.0))  # every job of the test fits at once
    storage = str(tmp_path / "storage")
    settings = Settings(home=tmp_path, admin_token=ADMIN, storage=storage)
    with TestClient(create_app(settings, backend=backend, reconcile=False)) as c:
        yield c, backend, storage


def test_the_reconciler_gives_each_code_its_reason_and_reads_no_text(
    client: tuple[TestClient, StubBackend, str],
) -> None:
    c, backend, storage = client
    reconcile = c.app.state.reconciler.run_once  # type: ignore[attr-defined]
    # insufficient_resources before step 1 goes back to the queue (test_queue_retries.py)
    codes = [code for code in FailureCode if code != FailureCode.INSUFFICIENT_RESOURCES]
    ids = [c.post("/v1/jobs", json=SPEC, headers=H).json()["id"] for _ in [*codes, "none"]]
    reconcile()  # all submitted
    # Each writes its code; the last dies without result.json, its log and message crying oom.
    for job_id, code in zip(ids, codes, strict=False):
        RunFiles.for_job(job_id, storage).write_result(RunResult.failed(code, "display only"))
    backend.log_text = "torch.OutOfMemoryError: CUDA out of memory\n"
    backend.status = "FAILED"
    reconcile()
    ended = [c.get(f"/v1/jobs/{job_id}", headers=H).json() for job_id in ids]
    assert [(job["status"], job["reason"]) for job in ended] == [
        *(("failed", FAILURE_REASONS[code]) for code in codes),
        ("failed", "worker_failed"),
    ]
    assert ended[0]["detail"] == "display only"


def test_the_driver_records_an_invalid_spec_and_a_failure_outside_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = str(tmp_path / "storage")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "j", "train": {"steps": -1}}))
    assert main(["run", str(bad), "--job-id", "job-1", "--storage", storage]) == 2
    written = RunFiles.for_job("job-1", storage).read_result(RunResult)
    assert written is not None and written.reason == FailureCode.INVALID_SPEC
    assert "train.steps" in (written.detail or "")
    assert main(["tune", str(bad), "--tune-id", "sweep-1", "--storage", storage]) == 2
    swept = RunFiles.for_job("sweep-1", storage).read_result(TuneResult)
    assert swept is not None and swept.reason == FailureCode.INVALID_SPEC

    def unreadable(*args: object) -> None:
        raise DataError("the data file vanished before the run started")

    good = tmp_path / "good.json"
    good.write_text(json.dumps(SPEC))
    monkeypatch.setattr("jobs.__main__.run_job", unreadable)
    assert main(["run", str(good), "--job-id", "job-2", "--storage", storage]) == 1
    outside = RunFiles.for_job("job-2", storage).read_result(RunResult)
    assert outside is not None and outside.reason == FailureCode.INVALID_DATA


def test_the_loop_config_is_one_typed_entry_of_rays_dict() -> None:
    spec = JobSpec.model_validate(SPEC)
    config = LoopConfig(spec, "train", "file:///r", "file:///r", TrackingRef("file:///m", "r1"))
    sent = pickle.loads(pickle.dumps(config.for_ray()))  # as Ray ships it to each worker
    assert LoopConfig.from_ray(sent) == config
    with pytest.raises(TypeError, match="not a LoopConfig"):
        LoopConfig.from_ray({"loop": {"spec": {}}})
    with pytest.raises(AttributeError):
        config.run_name = "other"  # type: ignore[misc]  # frozen
