"""LoRA jobs on a real local Ray: two workers (DDP or DeepSpeed ZeRO-2 or -3) train an adapter,
checkpoint it alone with its base reference, and resume after a killed worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.modeling.adapters import is_adapter
from jobs.modeling.model import load_checkpoint_model
from jobs.records.models import BaseReference
from tests.support.training import run_killing_a_worker, tiny_spec

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ADAPTER_FILES = {"adapter_model.safetensors", "adapter_config.json", "base.json", "spec.json"}
LORA = {"r": 4, "alpha": 8.0, "target_modules": ["q_proj", "v_proj"]}


@pytest.mark.parametrize("stage", [None, 2, 3], ids=["ddp", "zero2", "zero3"])
def test_a_lora_job_resumes_after_a_killed_worker(
    ray_cluster: str, storage: Path, stage: int | None
) -> None:
    scaling = {"deepspeed": {"stage": stage}} if stage else {}
    spec = tiny_spec(
        model={"adapter": LORA},
        train={"steps": 30, "eval_every": 10, "checkpoint_every": 10, "lr": 0.01},
        scaling=scaling,
    )
    job = f"lora-kill-{stage or 'ddp'}"
    rows = run_killing_a_worker(ray_cluster, spec, job, storage, 300, 500)
    assert rows[-1]["step"] == 30
    assert max(r["resumed_from"] for r in rows) >= 10  # from a checkpoint, not from scratch
    losses = [r["loss"] for r in rows if "loss" in r]
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5  # the adapter alone still learns

    folder = Path([r for r in rows if "checkpoint" in r][-1]["checkpoint"])
    names = {p.name for p in folder.iterdir()}
    assert names >= ADAPTER_FILES
    assert "model.safetensors" not in names  # the adapter alone, never the full model
    base = BaseReference.model_validate_json((folder / "base.json").read_text())
    assert base.source == "random:tiny-digit" and base.seed == spec.train.seed
    # The state it resumed from is dropped once the job succeeded; the adapter stays.
    assert "trainer_state.pt" not in names and "deepspeed" not in names
    assert is_adapter(load_checkpoint_model(folder))  # verified base + adapter
