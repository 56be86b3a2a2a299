"""A training job whose storage is an S3 URI, against a real S3-compatible server on loopback."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import boto3
import pyarrow.fs as pafs
import pytest
from moto.server import ThreadedMotoServer

from jobs.infer import NumericPredictor
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec, load_spec_file
from jobs.train.runner import run_job
from service.registry import Registry
from service.store import Database, JobRow, migrate

pytestmark = [pytest.mark.ray, pytest.mark.slow]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-smmd.yaml"
BUCKET = "numtune-test"


@pytest.fixture
def s3_uri() -> Iterator[str]:
    # Ray workers read these from the environment the session's Ray started with
    # (tests/integration/conftest.py); the server only ever listens on 127.0.0.1.
    assert os.environ.get("AWS_ACCESS_KEY_ID") == "numtune-test"
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    boto3.client("s3", endpoint_url=f"http://{host}:{port}").create_bucket(Bucket=BUCKET)
    yield f"s3://{BUCKET}/store?endpoint_override={host}:{port}&scheme=http"
    server.stop()


def test_checkpoints_and_records_land_in_s3(ray_cluster: str, s3_uri: str, tmp_path: Path) -> None:
    data = load_spec_file(EXAMPLE)
    data["train"] = {**data["train"], "steps": 4, "eval_every": 4, "checkpoint_every": 4}
    data["scaling"] = {"num_workers": 1}
    result = run_job(JobSpec.model_validate(data), "s3-job", s3_uri)
    assert result.status == "succeeded", result.detail
    assert result.best_checkpoint is not None

    files = RunFiles.for_job("s3-job", s3_uri)
    assert json.loads(files.read_text("result.json") or "{}")["status"] == "succeeded"
    rows = [json.loads(line) for line in (files.read_text("metrics.jsonl") or "").splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]

    # The best checkpoint is an object-store folder holding the weights.
    fs, path = pafs.FileSystem.from_uri(result.best_checkpoint)
    assert isinstance(fs, pafs.S3FileSystem)
    names = {info.base_name for info in fs.get_file_info(pafs.FileSelector(path))}
    assert {"model.safetensors", "config.json", "spec.json", "metrics.json"} <= names
    assert "trainer_state.pt" not in names  # dropped from the bucket once the job succeeded

    # Registered from the object store, then loaded as serving does: downloaded into the
    # local cache, every sha256 checked, and asked a question.
    db = Database(f"sqlite:///{tmp_path / 'numtune.db'}")
    migrate(db.engine)
    registry = Registry(db, s3_uri, tmp_path / "served")
    job = JobRow(
        id="s3-job",
        kind="job",
        owner="ann",
        status="succeeded",
        spec_json=data,
        best_checkpoint=result.best_checkpoint,
        result=result.model_dump(),
    )
    version = registry.register(name="s3model", owner="ann", job=job)
    assert "model.safetensors" in version.files and version.artifact == "registry/s3model/v1"
    names = {
        i.base_name
        for i in fs.get_file_info(pafs.FileSelector(f"{BUCKET}/store/registry/s3model/v1"))
    }
    assert "model.safetensors" in names
    with registry.verified_copy(registry.resolve("s3model:1")) as folder:
        assert folder.is_relative_to(tmp_path / "served")
        assert (folder / "model.safetensors").is_file()
        predictor = NumericPredictor.from_checkpoint(folder)
    answer = predictor.predict(["What is 2 + 2?"], max_new_tokens=4, samples=2, seed=0)[0]
    assert isinstance(answer.text, str) and answer.samples == 2
