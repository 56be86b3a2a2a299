"""Training jobs on a real local Ray: DDP, every loss, DeepSpeed, a killed worker."""

from __future__ import annotations

import json
import math
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from ray.util.state import list_actors

from jobs.runner import build_trainer, run_job
from jobs.spec import LOSS_NAMES, JobSpec, load_spec_file
from jobs.storage import RunFiles

pytestmark = [pytest.mark.ray, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CHECKPOINT_FILES = {"model.safetensors", "config.json", "spec.json", "metrics.json"}


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


def test_two_ddp_workers_learn_and_checkpoint(ray_cluster: str, storage: Path) -> None:
    spec = tiny_spec(train={"steps": 30, "eval_every": 10, "checkpoint_every": 10})
    result = run_job(spec, "ddp-tiny", str(storage))
    assert result.status == "succeeded", result.detail

    rows = metric_rows(RunFiles.for_job("ddp-tiny", str(storage)))
    losses = [r["loss"] for r in rows if "loss" in r]
    assert len(losses) == 30
    # The loss falls: the last five steps average well below the first five.
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5
    assert {"ce", "mmd", "smooth", "eval_exact_match", "eval_mae"} <= set().union(*rows)

    # Every kept checkpoint is a complete folder; Ray keeps the best two by the eval metric
    # plus, always, the latest one (it is what a restart resumes from).
    assert result.best_checkpoint is not None
    best = Path(result.best_checkpoint)
    assert {p.name for p in best.iterdir()} >= CHECKPOINT_FILES
    assert any(p.name.startswith("tokenizer") for p in best.iterdir())
    assert json.loads((best / "spec.json").read_text())["loss"]["name"] == "smmd"
    reported = [r for r in rows if "checkpoint" in r]
    assert len(reported) == 3
    # Ray ranks equal scores by report order, the later one above the earlier.
    ranked = sorted(reversed(reported), key=lambda r: -r["eval_exact_match"])
    expected = {Path(r["checkpoint"]).name for r in ranked[:2]} | {
        Path(reported[-1]["checkpoint"]).name
    }
    kept = {
        p.name for p in best.parent.iterdir() if p.is_dir() and p.name.startswith("checkpoint_")
    }
    assert kept == expected


@pytest.mark.parametrize("loss", LOSS_NAMES)
def test_every_loss_trains(ray_cluster: str, storage: Path, loss: str) -> None:
    # Ray Train's in-process mode runs the same worker loop without the 15 s start-up.
    spec = tiny_spec(
        loss={"name": loss},
        train={"steps": 4, "eval_every": 4, "checkpoint_every": 4, "warmup_steps": 0},
        data={"train_size": 64, "eval_size": 4},
    )
    fit = build_trainer(spec, RunFiles.for_job(f"loss-{loss}", str(storage)), in_process=True).fit()
    assert fit.error is None
    assert math.isfinite(fit.metrics["loss"]) and fit.metrics["loss"] > 0
    assert fit.metrics["step"] == 4
    numeric = set(fit.metrics) - {"loss", "ce", "lr", "step", "grad_norm", "resumed_from"}
    if loss == "ce":
        assert not any(k in numeric for k in ("emd", "mmd", "smooth", "mse"))
    else:
        assert numeric - {k for k in numeric if k.startswith("eval_") or k.endswith("_s")}


def test_deepspeed_zero2_on_cpu(ray_cluster: str, storage: Path) -> None:
    spec = tiny_spec(
        train={"steps": 6, "eval_every": 6, "checkpoint_every": 6},
        scaling={"num_workers": 2, "deepspeed": {"stage": 2}},
        loss={"name": "emd"},
    )
    result = run_job(spec, "zero2-tiny", str(storage))
    assert result.status == "succeeded", result.detail
    assert {p.name for p in Path(result.best_checkpoint or "").iterdir()} >= CHECKPOINT_FILES


def _train_worker_pids() -> list[int]:
    actors = list_actors(filters=[("state", "=", "ALIVE")], detail=True)
    return [a.pid for a in actors if "RayTrainWorker" in (a.class_name or "")]


def test_killed_worker_resumes_from_checkpoint(ray_cluster: str, storage: Path) -> None:
    spec = tiny_spec(train={"steps": 40, "eval_every": 10, "checkpoint_every": 10})
    files = RunFiles.for_job("kill-tiny", str(storage))
    outcome: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: outcome.update(run_job(spec, "kill-tiny", str(storage)).model_dump())
    )
    runner.start()

    # Wait for the first checkpoint, then kill a training worker process outright.
    deadline = time.monotonic() + 240
    while not any("checkpoint" in r for r in metric_rows(files)):
        assert time.monotonic() < deadline, "no checkpoint was reported in time"
        time.sleep(0.5)
    pids = _train_worker_pids()
    assert pids, "no live Ray Train worker found"
    os.kill(pids[0], signal.SIGKILL)
    runner.join(timeout=400)

    assert outcome.get("status") == "succeeded", outcome.get("detail")
    rows = metric_rows(files)
    assert rows[-1]["step"] == 40
    # The restarted workers picked up from a saved checkpoint, not from scratch.
    assert max(r["resumed_from"] for r in rows) >= 10
