"""MLflow tracking on the local Ray, with a SQLite MLflow store under tmp_path, read back
through mlflow's own client: a job's run, and the registry's version and alias mirrored to
MLflow's model registry; and a sweep as a parent run with its trials as child runs.

Not the service's whole path: the first test stubs the backend and turns the reconciler off,
runs the job with `run_job` (Ray Train on the local Ray) and writes the job's state
transitions itself, so what it shows is the tracking and the mirroring, not how the
reconciler drives a Ray job (the e2e tests on `numtune up` do that, without MLflow)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.spec import JobSpec, TuneSpec, load_spec_file
from jobs.train.runner import run_job
from jobs.tune.sweep import run_tune
from service.app import create_app
from service.settings import Settings
from tests.support.stub_backend import StubBackend

pytestmark = [pytest.mark.ray, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ADMIN = "adm_Yq8wE3rT6yU1iO4pA7sD2fG5hJ9kL0zX"
AUTH = {"Authorization": f"Bearer {ADMIN}"}


def tiny_job() -> dict[str, Any]:
    """examples/tiny-smmd.yaml on one worker, 6 steps, a row every step, one evaluation."""
    spec = load_spec_file(EXAMPLES / "tiny-smmd.yaml")
    spec["data"] = {**spec["data"], "train_size": 64, "eval_size": 4}  # type: ignore[dict-item]
    spec["train"] = {  # type: ignore[dict-item]
        **spec["train"],  # type: ignore[dict-item]
        "steps": 6,
        "log_every": 1,
        "eval_every": None,
        "checkpoint_every": None,
        "keep_top_k": 1,
    }
    spec["scaling"] = {"num_workers": 1, "cpus_per_worker": 1}
    spec["calibration"] = {"questions": 0}
    return spec


def test_registered_version_and_alias_are_mirrored_to_mlflow(
    ray_cluster: str, storage: Path, tmp_path: Path
) -> None:
    """A job submitted over REST gets the service's tracking URI and owner; run by hand
    (`run_job`, the transitions written here: no reconciler, backend stubbed), it is one
    MLflow run with every step's loss; its registered version, given an alias over REST,
    appears in MLflow's model registry under that alias, linked to the run."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    settings = Settings(home=tmp_path, admin_token=ADMIN, storage=str(storage), mlflow_uri=uri)
    with TestClient(create_app(settings, backend=StubBackend(), reconcile=False)) as client:
        services = client.app.state.services  # type: ignore[attr-defined]
        r = client.post("/v1/jobs", json=tiny_job(), headers=AUTH)
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        # What the reconciler would hand Ray: the stored spec, run by `python -m jobs run`.
        spec = JobSpec.model_validate(services.jobs.get(job_id).spec)
        assert spec.tracking.mlflow_uri == uri
        result = run_job(spec, job_id, str(storage))
        assert result.status == "succeeded", result.detail
        services.jobs.transition(job_id, "queued", "submitted")
        services.jobs.transition(
            job_id,
            "submitted",
            "succeeded",
            best_checkpoint=result.best_checkpoint,
            result=result.model_dump(mode="json"),
        )
        version = services.registry.register_job(services.jobs.get(job_id))
        r = client.put(
            f"/v1/models/{version.name}/aliases/production",
            json={"version": version.version},
            headers=AUTH,
        )
        assert r.status_code == 200, r.text

    mlflow = MlflowClient(uri, registry_uri=uri)
    experiment = mlflow.get_experiment_by_name("numtune")
    (run,) = mlflow.search_runs([experiment.experiment_id], f"tags.`numtune.job_id` = '{job_id}'")
    assert run.info.status == "FINISHED"
    assert run.data.params["loss.name"] == "smmd" and run.data.params["train.steps"] == "6"
    assert run.data.tags["numtune.owner"] == "admin" and run.data.tags["numtune.loss"] == "smmd"
    steps = [m.step for m in mlflow.get_metric_history(run.info.run_id, "loss")]
    assert steps == [1, 2, 3, 4, 5, 6]  # every row, at its step
    assert "best_eval_exact_match" in run.data.metrics
    assert run.data.tags["numtune.best_checkpoint"] == result.best_checkpoint

    aliased = mlflow.get_model_version_by_alias(version.name, "production")
    assert aliased.tags["numtune.version"] == str(version.version)
    assert aliased.run_id == run.info.run_id  # linked to the job's run
    assert aliased.source.endswith(f"registry/{version.name}/v{version.version}")


def test_sweep_is_a_parent_run_with_trial_children(
    ray_cluster: str, storage: Path, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    data = load_spec_file(EXAMPLES / "tiny-tune-smmd.yaml")
    data["base"]["train"] = {**data["base"]["train"], "steps": 4, "eval_every": 2}  # type: ignore[index]
    data["base"]["calibration"] = {"questions": 0}  # type: ignore[index]
    data["base"]["tracking"] = {"mlflow_uri": uri, "owner": "ann"}  # type: ignore[index]
    data.update(num_samples=2, asha=None, max_concurrent_trials=1)
    result = run_tune(TuneSpec.model_validate(data), "mlflow-sweep", str(storage))
    assert result.status == "succeeded", result

    mlflow = MlflowClient(uri)
    experiment = mlflow.get_experiment_by_name("numtune").experiment_id
    (parent,) = mlflow.search_runs([experiment], "tags.`numtune.job_id` = 'mlflow-sweep'")
    assert parent.data.params["base.loss.name"] == "smmd"
    assert parent.data.tags["numtune.best_trial"] == result.best_trial
    assert "best_eval_ce" in parent.data.metrics
    children = mlflow.search_runs(
        [experiment], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    )
    assert len(children) == 2
    for child in children:
        assert child.data.tags["numtune.sweep_id"] == "mlflow-sweep"
        assert {"bandwidth", "weight"} <= set(child.data.params)  # the trial's values
        steps = [m.step for m in mlflow.get_metric_history(child.info.run_id, "eval_ce")]
        assert steps == [2, 4]  # Tune's reports at the training step they were made
