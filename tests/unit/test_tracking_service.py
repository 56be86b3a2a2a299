"""The service's side of MLflow tracking: the URI and owner a submitted spec gets, which
URIs a user may name, and the registry's mirror into a real MLflow Model Registry (SQLite
under tmp_path)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.support.registry import ADMIN, auth, finished_job
from tests.support.stub_backend import StubBackend

ALLOWED = "https://mlflow.example"


def app_client(tmp_path: Path, mlflow_uri: str | None) -> TestClient:
    settings = Settings(
        home=tmp_path,
        admin_token=ADMIN,
        storage=str(tmp_path / "storage"),
        mlflow_uri=mlflow_uri,
        mlflow_allowed_servers=f"{ALLOWED}, https://other.example:5000",
    )
    return TestClient(create_app(settings, backend=StubBackend(), reconcile=False))


@pytest.fixture
def mlflow_uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/mlflow.db"


@pytest.fixture
def tracked(tmp_path: Path, mlflow_uri: str) -> Iterator[TestClient]:
    with app_client(tmp_path, mlflow_uri) as client:
        yield client


def submit(client: TestClient, tracking: dict[str, Any] | None = None) -> Any:
    body: dict[str, Any] = {"name": "arith"}
    if tracking is not None:
        body["tracking"] = tracking
    return client.post("/v1/jobs", json=body, headers=auth())


def test_submit_writes_the_service_uri_and_the_caller_as_owner(
    tracked: TestClient, mlflow_uri: str
) -> None:
    r = submit(tracked)
    assert r.status_code == 202, r.text
    assert r.json()["spec"]["tracking"] == {
        "mlflow_uri": mlflow_uri,
        "experiment": "numtune",
        "owner": "admin",
    }
    # A server on the operator's list is kept; the owner is always the caller's.
    theirs = {"mlflow_uri": f"{ALLOWED}/team-a", "owner": "mallory"}
    tracking = submit(tracked, theirs).json()["spec"]["tracking"]
    assert (tracking["mlflow_uri"], tracking["owner"]) == (f"{ALLOWED}/team-a", "admin")
    # A sweep's base job is tracked the same way.
    sweep = {"name": "sweep", "base": {"name": "arith", "train": {"eval_every": 5}}}
    sweep["space"] = {"weight": {"kind": "choice", "values": [0.1, 0.3]}}
    r = tracked.post("/v1/tunes", json=sweep, headers=auth())
    assert r.status_code == 202, r.text
    assert r.json()["spec"]["base"]["tracking"]["mlflow_uri"] == mlflow_uri


@pytest.mark.parametrize(
    "uri",
    [
        "sqlite:////tmp/elsewhere.db",
        "file:///etc/mlruns",
        # Servers not on the operator's list: the Ray head's own port, a look-alike host.
        "http://127.0.0.1:8265",
        "https://mlflow.example.attacker.example",
        "http://mlflow.example",  # listed as https only
        "https://other.example",  # listed with port 5000
    ],
)
def test_a_user_may_name_only_listed_servers(tracked: TestClient, uri: str) -> None:
    r = submit(tracked, {"mlflow_uri": uri})
    assert r.status_code == 422
    assert "tracking.mlflow_uri" in r.text


def test_without_the_setting_the_spec_is_left_as_sent(tmp_path: Path) -> None:
    with app_client(tmp_path, None) as client:
        r = submit(client)
        assert r.status_code == 202
        assert r.json()["spec"]["tracking"]["mlflow_uri"] is None


def test_settings_refuse_an_unknown_scheme(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mlflow_uri"):
        Settings(home=tmp_path, mlflow_uri="/srv/mlruns")


def test_registry_mirrors_versions_and_aliases_into_mlflow(
    tracked: TestClient, mlflow_uri: str
) -> None:
    from mlflow.tracking import MlflowClient

    registry = tracked.app.state.services.registry  # type: ignore[attr-defined]
    first, _ = finished_job(tracked)
    second, _ = finished_job(tracked)
    registry.register_job(first)
    registry.register_job(second)
    mlflow = MlflowClient(mlflow_uri, registry_uri=mlflow_uri)
    versions = {v.tags["numtune.version"]: v for v in mlflow.search_model_versions("name='arith'")}
    assert set(versions) == {"1", "2"}
    storage = Path(tracked.app.state.services.settings.storage_root)  # type: ignore[attr-defined]
    assert versions["1"].source == str(storage / "registry" / "arith" / "v1")
    assert versions["2"].tags["numtune.job_id"] == second.id

    r = tracked.put("/v1/models/arith/aliases/production", json={"version": 1}, headers=auth())
    assert r.status_code == 200
    assert mlflow.get_model_version_by_alias("arith", "production").version == versions["1"].version
    tracked.put("/v1/models/arith/aliases/production", json={"version": 2}, headers=auth())
    assert mlflow.get_model_version_by_alias("arith", "production").version == versions["2"].version
    assert tracked.delete("/v1/models/arith/aliases/production", headers=auth()).status_code == 204
    assert "production" not in mlflow.get_registered_model("arith").aliases


def test_mlflow_failing_never_fails_a_registration(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    caplog.set_level(logging.WARNING, logger="service.registry.mlflow_mirror")
    # A store that cannot be created: every mirror call fails.
    with app_client(tmp_path, f"sqlite:///{blocker}/mlflow.db") as client:
        job, _ = finished_job(client)
        row = client.app.state.services.registry.register_job(job)  # type: ignore[attr-defined]
        assert (row.name, row.version) == ("arith", 1)
        r = client.put("/v1/models/arith/aliases/production", json={"version": 1}, headers=auth())
        assert r.status_code == 200 and r.json()["aliases"] == {"production": 1}
    assert "MLflow registry mirror" in caplog.text and "mirroring arith:1 failed" in caplog.text
