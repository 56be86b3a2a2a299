"""Issue 30 item 15 (L6): a run whose loss becomes NaN fails as `diverged`, naming the
step, and saves no checkpoint (so nothing can be registered or served)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from jobs.modeling.folders import save_pretrained_safetensors
from jobs.modeling.model import load_model_and_tokenizer
from jobs.records.run_files import RunFiles
from jobs.spec import ModelSpec
from jobs.train.runner import run_job
from tests.support.training import tiny_spec

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def poisoned_model(folder: Path) -> Path:
    """The tiny random model with one NaN in its final norm: every logit is NaN, so the
    loss is NaN from the first step (as a corrupted checkpoint would make it)."""
    model, tokenizer = load_model_and_tokenizer(ModelSpec(source="random:tiny-digit"))
    with torch.no_grad():
        model.get_decoder().norm.weight[0] = float("nan")
    return save_pretrained_safetensors(model, tokenizer, folder)


def test_a_nan_loss_fails_the_run_as_diverged(
    ray_cluster: str, storage: Path, tmp_path: Path
) -> None:
    spec = tiny_spec(
        model={"source": str(poisoned_model(tmp_path / "model"))},
        train={"steps": 4, "eval_every": 2, "checkpoint_every": 2, "warmup_steps": 0},
        data={"train_size": 64, "eval_size": 4},
        scaling={"num_workers": 1},
        max_failures=0,
    )
    result = run_job(spec, "nan-loss", str(storage))
    assert (result.status, result.reason) == ("failed", "diverged"), result.detail
    assert "at step 1" in (result.detail or "")
    assert result.best_checkpoint is None
    run = Path(RunFiles.for_job("nan-loss", str(storage)).uri)
    assert not list(run.rglob("checkpoint_step_*"))
