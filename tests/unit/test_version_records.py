"""Issue 46 item 3: a registered version is one typed record (service/registry/record.py);
calibration and lineage have columns of their own, and migration 0009 moves them out of the
packed `metrics` of existing rows; a serving replica's cold load resolves once and reads no
spec.json; one function decides a job's tracking URI."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from fastapi.testclient import TestClient
from sqlalchemy import text

import jobs.infer.loaded
import jobs.tracking.job
from jobs.modeling.folders import ModelUnavailableError
from service.jobs.tracking import tracked_job
from service.registry import ModelVersion, Registry
from service.serving.adapters import AdapterHost, checkpoint_spec
from service.serving.versions import ResolvedVersions
from service.settings import Settings
from service.store import Database, migrate
from service.store.db import MIGRATIONS
from service.store.schema import ModelVersionRow
from tests.support.calibration import OLD
from tests.support.registry import SPEC, client, finished_job

__all__ = ["client"]  # the fixture, from the support package

BASE = {"source": "random:tiny-digit", "seed": 0, "pinned": None, "sha256": {"w": "ab" * 32}}
LORA = {"model": {"source": "random:tiny-digit", "adapter": {"r": 4, "alpha": 8.0}}}
ADAPTER_SPEC = {**SPEC.model_dump(mode="json"), **LORA}
PACKED = {"eval_mae": 3.0, "step": 5, "calibration": OLD, "base": BASE}  # before 0009
FROM_0008 = "0008_usage_segments"


def _row(spec: dict[str, Any]) -> ModelVersionRow:
    return ModelVersionRow(
        name="arith", version=2, job_id="job-1", source="/runs/job-1/ckpt",
        artifact="registry/arith/v2", files={"spec.json": "cd" * 32}, spec=spec,
        dataset={"task": "arithmetic"}, metrics={"eval_mae": 3.0}, calibration=OLD,
        lineage={"base": BASE}, created_at=datetime(2026, 1, 2, tzinfo=UTC),
    )  # fmt: skip


def test_the_record_is_typed_and_round_trips(tmp_path: Path) -> None:
    record = ModelVersion.of_row(_row(ADAPTER_SPEC))
    assert record.ref == "arith:2" and record.spec is not None
    assert record.spec.model.adapter is not None and record.adapter == record.spec.model.adapter
    assert record.base is not None and record.base.sha256 == {"w": "ab" * 32}
    assert record.calibration is not None and record.calibration.layout == 1  # read as layout 2
    assert ModelVersion.model_validate_json(record.model_dump_json()) == record
    assert record.lineage.stored() == {"base": BASE}
    # The API's shape from it: the recorded spec as is, the lineage dumped, metrics plain.
    registry = Registry(Database(f"sqlite:///{tmp_path / 'r.db'}"), str(tmp_path), tmp_path)
    info = registry.info(record, aliases={"production": 2, "old": 1})
    assert info.spec == ADAPTER_SPEC and info.base == BASE and info.aliases == ["production"]
    assert info.adapter is not None and (info.adapter["r"], info.adapter["alpha"]) == (4, 8.0)
    assert info.task == "arithmetic"
    assert info.metrics == {"eval_mae": 3.0} and info.calibration == record.calibration
    # A spec recorded in a shape JobSpec no longer has: kept as recorded, typed as None, and
    # a replica refuses to guess its task (409), as reading the file would.
    old = ModelVersion.of_row(_row({"name": "arith", "gone_field": 1}))
    assert old.spec is None and old.adapter is None and old.recorded_spec["gone_field"] == 1
    assert registry.info(old, aliases={}).task == "arithmetic"
    with pytest.raises(ModelUnavailableError, match=r"arith:2: its spec\.json"):
        checkpoint_spec(old)
    assert checkpoint_spec(old.model_copy(update={"files": {}})) is None  # a plain folder


def _alembic(db: Database) -> tuple[Config, Any]:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    connection = db.engine.connect()
    config.attributes["connection"] = connection
    return config, connection


def test_migration_0009_moves_packed_keys_out_of_metrics(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'numtune.db'}")  # a real file, as deployed
    config, connection = _alembic(db)
    with connection.begin():
        command.upgrade(config, FROM_0008)
        connection.execute(text(
            "INSERT INTO models (name, owner, created_at, next_version) "
            "VALUES ('arith', 'ann', '2026-01-01 00:00:00', 3)"
        ))  # fmt: skip
        for version, metrics in ((1, {"eval_mae": 4.0}), (2, PACKED)):
            connection.execute(
                text(
                    "INSERT INTO model_versions (name, version, job_id, source, artifact, files,"
                    " spec, dataset, metrics, created_at) VALUES ('arith', :v, :job, '/ckpt',"
                    " 'registry/arith/v1', '{}', :spec, '{}', :metrics, '2026-01-01 00:00:00')"
                ),
                {"v": version, "job": f"job-{version}", "spec": json.dumps(ADAPTER_SPEC),
                 "metrics": json.dumps(metrics)},
            )  # fmt: skip
    connection.close()
    migrate(db.engine)  # to head: 0009 moves what 0008 packed
    registry = Registry(db, str(tmp_path), tmp_path / "cache")
    moved = registry.resolve("arith:2")
    assert moved.metrics == {"eval_mae": 3.0, "step": 5}
    assert moved.base is not None and moved.base.model_dump(mode="json") == BASE
    assert moved.calibration is not None and moved.calibration.levels[1].nested_parameter == 19
    plain = registry.resolve("arith:1")  # nothing packed: nothing moved
    assert (plain.metrics, plain.calibration, plain.base) == ({"eval_mae": 4.0}, None, None)
    # Downgrade packs them back as they were.
    config, connection = _alembic(db)
    with connection.begin():
        command.downgrade(config, FROM_0008)
        stored = connection.execute(text("SELECT version, metrics FROM model_versions")).all()
    connection.close()
    assert {v: json.loads(m) for v, m in stored} == {1: {"eval_mae": 4.0}, 2: PACKED}
    db.dispose()


def test_a_cold_load_resolves_once_and_reads_no_spec_json(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, _ = finished_job(client)
    registry: Registry = client.app.state.services.registry  # type: ignore[attr-defined]
    registry.register_job(job)
    registry.set_alias("arith", "production", 1)
    calls: Counter[str] = Counter()

    def counted(owner: Any, name: str) -> None:
        real = getattr(owner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, call)

    counted(registry, "resolve")
    counted(registry.store, "version")  # the version's row, read from SQL

    def no_file(folder: Path) -> None:
        raise AssertionError(f"{folder}/spec.json read again")

    monkeypatch.setattr(jobs.infer.loaded, "read_checkpoint_spec", no_file)
    versions = ResolvedVersions(registry, ttl_s=60)
    version = asyncio.run(versions.resolve("arith@production", None))  # the ingress
    predictor = versions.load(version.ref, AdapterHost("fp32"))  # Serve's multiplexed load
    assert calls == {"resolve": 1, "version": 1}
    assert (predictor.task, predictor.use_chat_template) == (
        SPEC.data.task,
        SPEC.model.use_chat_template,
    )
    # The next request within token_cache_s: no lookup at all.
    assert asyncio.run(versions.resolve("arith@production", None)) is version
    assert calls == {"resolve": 1, "version": 1}


def test_one_function_decides_the_tracking_uri(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decided: list[str | None] = []
    real = jobs.tracking.job.tracking_uri

    def spy(*args: Any) -> str | None:
        decided.append(uri := real(*args))
        return uri

    monkeypatch.setattr(jobs.tracking.job, "tracking_uri", spy)
    monkeypatch.setenv("NUMTUNE_MLFLOW_URI", "http://job-env:5000")
    service = Settings(home=tmp_path, mlflow_uri="http://service:5000")
    tracked = tracked_job(SPEC, service, "ann").tracking
    assert (tracked.mlflow_uri, tracked.owner) == ("http://service:5000", "ann")
    # The service's setting (which may come from its config file) decides at submit, never
    # the service process's environment; a job run by hand reads its own environment.
    assert tracked_job(SPEC, Settings(home=tmp_path, mlflow_uri=None), "ann") == SPEC
    job_side = jobs.tracking.job.with_tracking_uri(SPEC).tracking.mlflow_uri
    assert job_side == "http://job-env:5000"
    assert decided == ["http://service:5000", None, "http://job-env:5000"]
