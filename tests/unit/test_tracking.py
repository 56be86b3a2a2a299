"""MLflow tracking of jobs (jobs/tracking/job.py) against a real local MLflow store (SQLite in
tmp_path), and the promise that nothing of MLflow loads without a tracking URI."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec
from jobs.tracking.job import JOB_TAG, RunLog, flat_params, open_job_run, with_tracking_uri
from jobs.train.steplog import StepLog

REPO = Path(__file__).resolve().parents[2]
SPEC = JobSpec.model_validate(
    {
        "name": "arith",
        "model": {"source": "random:tiny-digit"},
        "data": {"modules": ["add_or_sub"]},
        "loss": {"name": "smmd", "bandwidth": 2.0},
        "tracking": {"owner": "ann"},
    }
)

# Loads what a job and the service load on their paths that could touch MLflow: the
# runner, a sweep, rank 0's writer, the app and its registry, a REST submit.
NO_TRACKING = textwrap.dedent(
    """
    import os, sys
    from fastapi.testclient import TestClient
    import jobs.train.runner, jobs.train.loop, jobs.tune.sweep
    from jobs.spec import JobSpec, TuneSpec
    from jobs.train.steplog import StepLog
    from jobs.records.run_files import RunFiles
    from jobs.tracking.job import open_job_run
    from service.app import create_app
    from service.settings import Settings
    from tests.support.stub_backend import StubBackend

    tmp = sys.argv[1]
    spec = JobSpec(name="arith")
    run = open_job_run(spec, "job-1")
    space = {"weight": {"kind": "choice", "values": [0.1]}}
    tune = TuneSpec(name="sweep", base=spec, space=space, asha=None)
    parent, callbacks = jobs.tune.sweep.sweep_tracking(tune, "tune-1")
    os.makedirs(tmp + "/run")
    log = StepLog(RunFiles.at(tmp + "/run"), run.log_rows if run else None)
    log.put({"step": 1, "loss": 1.0})
    log.flush()
    admin = "adm_Yq8wE3rT6yU1iO4pA7sD2fG5hJ9kL0zX"
    settings = Settings(home=tmp, admin_token=admin, storage=tmp + "/storage")
    with TestClient(create_app(settings, backend=StubBackend(), reconcile=False)) as client:
        auth = {"Authorization": "Bearer " + admin}
        r = client.post("/v1/jobs", json={"name": "arith"}, headers=auth)
        assert r.status_code == 202, r.text
    print("tracked" if run or parent or callbacks else "untracked", "mlflow" in sys.modules)
    """
)


@pytest.mark.parametrize("uri", [None, "sqlite"])
def test_mlflow_is_imported_only_with_a_tracking_uri(tmp_path: Path, uri: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMTUNE_MLFLOW")}
    if uri:  # the control: the same script with the setting does load it
        env["NUMTUNE_MLFLOW_URI"] = f"sqlite:///{tmp_path}/mlflow.db"
    done = subprocess.run(
        [sys.executable, "-c", NO_TRACKING, str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    expected = "tracked True" if uri else "untracked False"
    assert done.stdout.strip().splitlines()[-1] == expected


def test_spec_flattens_into_params() -> None:
    params = flat_params(SPEC.model_dump(mode="json"))
    assert params["loss.name"] == "smmd"
    assert params["loss.bandwidth"] == "2.0"
    assert params["data.modules"] == '["add_or_sub"]'
    assert params["train.steps"] == str(SPEC.train.steps)
    assert "register_as" not in params  # unset fields are not params
    assert flat_params({"a b?": {"c": True}}) == {"a b_.c": "true"}  # MLflow's key alphabet


def test_environment_uri_is_written_into_the_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMTUNE_MLFLOW_URI", "http://mlflow.internal:5000")
    assert with_tracking_uri(SPEC).tracking.mlflow_uri == "http://mlflow.internal:5000"
    own = SPEC.model_copy(
        update={"tracking": SPEC.tracking.model_copy(update={"mlflow_uri": "https://a"})}
    )
    assert with_tracking_uri(own).tracking.mlflow_uri == "https://a"  # the spec's wins


def test_spec_refuses_other_uri_schemes() -> None:
    with pytest.raises(ValueError, match=r"tracking\.mlflow_uri"):
        JobSpec.model_validate({"name": "a", "tracking": {"mlflow_uri": "/etc/somewhere"}})


def test_job_run_gets_params_tags_every_row_and_the_best(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    spec = SPEC.model_copy(
        update={"tracking": SPEC.tracking.model_copy(update={"mlflow_uri": uri})}
    )
    run = open_job_run(spec, "job-1")
    assert run is not None
    # Rank 0's writer: rows reach metrics.jsonl and the run from the same thread.
    (tmp_path / "run").mkdir()
    steplog = StepLog(RunFiles.at(str(tmp_path / "run")), run.log_rows)
    for step in (1, 2, 3):
        steplog.put({"step": step, "loss": 1.0 / step, "ce": 0.5})
    steplog.put({"step": 3, "eval_mae": 2.5, "checkpoint": "/ckpt/3"})
    steplog.flush()
    run.log_best({"step": 3, "eval_mae": 2.5, "loss": 0.3}, "/ckpt/3")
    run.close(succeeded=True)

    client = MlflowClient(uri)
    got = client.get_run(run.run_id)
    assert got.info.status == "FINISHED"
    assert got.data.params["loss.name"] == "smmd" and got.data.params["tracking.owner"] == "ann"
    tags = got.data.tags
    assert (tags[JOB_TAG], tags["numtune.owner"], tags["numtune.loss"]) == ("job-1", "ann", "smmd")
    assert tags["numtune.best_checkpoint"] == "/ckpt/3"
    history = client.get_metric_history(run.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(1, 1.0), (2, 0.5), (3, 1.0 / 3)]
    assert "checkpoint" not in got.data.metrics  # text is not a metric
    assert got.data.metrics["best_eval_mae"] == 2.5
    assert len(RunFiles.at(str(tmp_path / "run")).read_metrics()) == 4

    again = open_job_run(spec, "job-1")  # a rerun of the same job resumes its run
    assert again is not None and again.run_id == run.run_id


def test_unreachable_mlflow_is_a_warning_not_a_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    caplog.set_level(logging.WARNING, logger="jobs.tracking.job")
    # A store that cannot be created (its folder is a file): the run is not opened.
    uri = f"sqlite:///{blocker}/mlflow.db"
    assert RunLog.open(uri, experiment="e", job_id="j", tags={}, params={}) is None
    # A run whose store went away: logging turns itself off, the writer goes on.
    run = RunLog(uri, "some-run")
    (tmp_path / "run").mkdir()
    steplog = StepLog(RunFiles.at(str(tmp_path / "run")), run.log_rows)
    steplog.put({"step": 1, "loss": 1.0})
    steplog.put({"step": 2, "loss": 0.5})
    steplog.flush()
    assert not run.on
    assert len(RunFiles.at(str(tmp_path / "run")).read_metrics()) == 2
    assert "MLflow tracking off" in caplog.text
