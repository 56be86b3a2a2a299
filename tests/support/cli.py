"""The `numtune` CLI's test rig: the real app served by uvicorn on loopback for a module's
tests, with Ray's place taken by a backend that finishes `finish-*` jobs at once, and a CLI
runner pointed at it (NUMTUNE_HOME and NUMTUNE_URL set, no token in the environment)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner, Result

from jobs.records.run_files import RunFiles
from service.app import create_app
from service.backends.ray_backend import RayJobInfo
from service.cli.main import app
from service.cli.processes import free_ports
from service.queue.admission import Capacity, Resources
from service.settings import Settings

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-smmd.yaml"


class FinishingBackend:
    """Ray's place: a job named `finish-*` "runs" at once, writing what a real run writes
    (metrics.jsonl, result.json); any other job stays RUNNING until stopped."""

    def __init__(self, storage: str):
        self.storage = storage
        self.states: dict[str, str] = {}
        self.stopped: list[str] = []
        self.names: list[str] = []  # every submitted spec's name

    def submit(
        self, job_id: str, kind: str, spec_json: str, submission_id: str | None = None
    ) -> None:
        # Ray knows a job by its submission id (the job id, or `<id>-rN` after a retry).
        ray_id = submission_id or job_id
        spec = json.loads(spec_json)
        self.names.append(spec["name"])
        if spec["name"].startswith("finish"):
            files = RunFiles.for_job(job_id, self.storage)
            steps = spec["train"]["steps"]
            rows = [{"step": s, "loss": 2.0 / s} for s in range(1, steps + 1)]
            rows[-1]["eval_exact_match"] = 0.5
            files.write_text("metrics.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
            result = {"status": "succeeded", "reason": None, "detail": None,
                      "best_checkpoint": None, "metrics": {"eval_exact_match": 0.5}}  # fmt: skip
            files.write_text("result.json", json.dumps(result))
            self.states[ray_id] = "SUCCEEDED"
        else:
            self.states[ray_id] = "RUNNING"

    def info(self, job_id: str) -> RayJobInfo:
        return RayJobInfo(self.states[job_id], None)

    def logs(self, job_id: str) -> str:
        return f"log of {job_id}\nthe last line\n"

    def stop(self, job_id: str) -> None:
        self.states[job_id] = "STOPPED"
        self.stopped.append(job_id)

    def ping(self) -> None:
        return None

    def capacity(self) -> Capacity:
        # Room for every job this module's tests leave running.
        return Capacity(Resources(256.0), Resources(256.0))


@dataclass
class Service:
    url: str
    home: Path
    backend: FinishingBackend


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    home = tmp_path_factory.mktemp("home")
    # --dev without an admin token: the app writes <home>/admin-token, which the CLI reads.
    settings = Settings(home=home, dev=True, admin_token=None, reconcile_interval_s=0.2)
    backend = FinishingBackend(settings.storage_root)
    port = free_ports(1)[0]
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings, backend=backend), port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield Service(f"http://127.0.0.1:{port}", home, backend)
    server.should_exit = True
    thread.join(timeout=15)


@pytest.fixture
def cli(service: Service, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("NUMTUNE_HOME", str(service.home))
    monkeypatch.setenv("NUMTUNE_URL", service.url)
    for name in ("NUMTUNE_TOKEN", "NUMTUNE_ADMIN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        result = runner.invoke(app, list(args))
        assert "Traceback" not in result.output, result.output
        if result.exception is not None:
            assert isinstance(result.exception, SystemExit), repr(result.exception)
        return result

    return invoke
