"""The optimizer and learning-rate schedule of a job, the same for both engines (DDP in
jobs/train/engine.py, DeepSpeed ZeRO in jobs/train/zero.py)."""

from __future__ import annotations

from typing import Any

import torch
from transformers import get_scheduler

from jobs.spec import JobSpec

SCHEDULES = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    # Only what trains: a LoRA job's frozen base has no gradients and needs no moments.
    return [p for p in model.parameters() if p.requires_grad]


def build_optimizer(model: torch.nn.Module, spec: JobSpec) -> torch.optim.Optimizer:
    return adamw(trainable_parameters(model), spec)


def adamw(params: list[torch.nn.Parameter], spec: JobSpec) -> torch.optim.Optimizer:
    """AdamW over `params` (a bf16 model's float32 master copies: jobs/train/master.py)."""
    return torch.optim.AdamW(params, lr=spec.train.lr, weight_decay=spec.train.weight_decay)


def build_schedule(opt: torch.optim.Optimizer, spec: JobSpec, steps: int) -> Any:
    return get_scheduler(
        SCHEDULES[spec.train.schedule],
        opt,
        num_warmup_steps=spec.train.warmup_steps,
        num_training_steps=steps,
    )
