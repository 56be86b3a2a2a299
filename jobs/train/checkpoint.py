"""Checkpoint folders: what is saved, and how training state comes back after a failure.

A checkpoint folder holds
    model.safetensors + config.json     weights (safetensors only) and architecture
    tokenizer files                     so the folder serves on its own
    spec.json                           the JobSpec that produced it
    metrics.json                        step and the metrics reported with it
    (an adapter job: adapter_model.safetensors + adapter_config.json + base.json instead of
     the model: the LoRA weights and the base's source and sha256, jobs/modeling/adapters.py)
    trainer_state.pt                    DDP: optimizer + schedule state (rank 0; resume)
    deepspeed/state/*.pt                DeepSpeed: the engine's own checkpoint, one ZeRO
                                        optimizer shard per rank (each rank reports its files;
                                        Ray Train merges them into this one folder)
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from jobs.modeling.adapters import save_adapter_files
from jobs.modeling.folders import ADAPTER_CONFIG
from jobs.records.models import SPEC
from jobs.spec import JobSpec

log = logging.getLogger(__name__)

SPEC_FILE = SPEC  # a checkpoint's spec.json is the same record as its run folder's
METRICS_FILE = "metrics.json"
STATE_FILE = "trainer_state.pt"


def save_checkpoint(
    out_dir: Path,
    *,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    spec: JobSpec,
    metrics: dict[str, Any],
) -> None:
    """Write the serving part of a checkpoint folder (rank 0 calls this; weights are full,
    unsharded); the engine adds its training state (`Engine.save_state`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)  # an adapter saves itself alone
    if (out_dir / ADAPTER_CONFIG).is_file():
        save_adapter_files(out_dir, model)
    tokenizer.save_pretrained(out_dir)
    (out_dir / SPEC_FILE).write_text(spec.model_dump_json(indent=2))
    (out_dir / METRICS_FILE).write_text(json.dumps(metrics, indent=2, sort_keys=True))


def save_trainer_state(
    out_dir: Path, optimizer: torch.optim.Optimizer, scheduler: torch.optim.lr_scheduler.LRScheduler
) -> None:
    state = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}
    torch.save(state, out_dir / STATE_FILE)


def load_trainer_state(ckpt_dir: Path) -> dict[str, Any] | None:
    """Optimizer/schedule state of a checkpoint, loaded without unpickling code."""
    path = ckpt_dir / STATE_FILE
    if not path.exists():
        return None
    state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    return state


def checkpoint_step(ckpt_dir: Path) -> int:
    return int(json.loads((ckpt_dir / METRICS_FILE).read_text())["step"])
