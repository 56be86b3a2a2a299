"""Training on a real local Ray: the tiny example spec with fields replaced, a run's metrics
rows, and a run whose Ray Train worker is SIGKILLed once Ray has recorded a checkpoint."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from ray.util.state import list_actors

from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec, load_spec_file
from jobs.train.runner import run_job

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def tiny_spec(**overrides: Any) -> JobSpec:
    """examples/tiny-smmd.yaml with fields replaced (section dicts are merged)."""
    data = load_spec_file(EXAMPLES / "tiny-smmd.yaml")
    for key, value in overrides.items():
        base = data.get(key)
        data[key] = {**base, **value} if isinstance(base, dict) else value
    return JobSpec.model_validate(data)


def metric_rows(files: RunFiles) -> list[dict[str, Any]]:
    text = files.read_text("metrics.jsonl") or ""
    return [json.loads(line) for line in text.splitlines()]


def _train_worker_pids(dashboard: str) -> list[int]:
    # This session's cluster by its address: other Ray clusters may run on the machine.
    actors = list_actors(address=dashboard, filters=[("state", "=", "ALIVE")], detail=True)
    return [a.pid for a in actors if a.pid is not None and "RayTrainWorker" in (a.class_name or "")]


def _ray_holds_a_checkpoint(files: RunFiles) -> bool:
    """Whether Ray Train's checkpoint manager has recorded a latest checkpoint for the run:
    its snapshot beside the checkpoints is what a restarted worker group resumes from."""
    named = [r["checkpoint"] for r in metric_rows(files) if "checkpoint" in r]
    if not named:
        return False
    snapshot = Path(named[0]).parent / "checkpoint_manager_snapshot.json"
    try:
        state = json.loads(snapshot.read_text())
    except (FileNotFoundError, json.JSONDecodeError):  # not yet written, or mid-write
        return False
    return state.get("latest_checkpoint_result") is not None


def run_killing_a_worker(
    ray_cluster: str,
    spec: JobSpec,
    job: str,
    storage: Path,
    register_within: float = 240,
    finish_within: float = 400,
) -> list[dict[str, Any]]:
    """Run `spec` as job `job`, SIGKILL one Ray Train worker once Ray has recorded the first
    checkpoint, and return the job's metrics rows after it succeeded.

    Ray's controller, not rank 0's metrics row, decides what a restarted worker group
    resumes from: rank 0's row names a checkpoint as soon as its own report returns, the
    controller registers it a poll later, once every rank's part is in (the ZeRO-3 shards
    take longest), and a worker killed in between restarts from scratch."""
    files = RunFiles.for_job(job, str(storage))
    outcome: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: outcome.update(run_job(spec, job, str(storage)).model_dump())
    )
    runner.start()
    deadline = time.monotonic() + register_within
    while not _ray_holds_a_checkpoint(files):
        assert time.monotonic() < deadline, "no checkpoint was registered in time"
        time.sleep(0.5)
    pids = _train_worker_pids(ray_cluster)
    assert pids, "no live Ray Train worker found"
    os.kill(pids[0], signal.SIGKILL)
    runner.join(timeout=finish_within)
    assert outcome.get("status") == "succeeded", outcome.get("detail")
    return metric_rows(files)
