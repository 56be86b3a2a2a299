"""One training-step interface over the two ways numtune distributes a model.

`DDPEngine`: Ray Train's `prepare_model` (DDP over gloo on CPU, nccl on GPU), AdamW and an HF
schedule (jobs/train/optim.py, both engines' own), gradient clipping. `DeepSpeedEngine`
(jobs/train/zero.py): a ZeRO stage 1/2/3 engine over the process group Ray Train already set
up; DeepSpeed itself is imported only when one is built.

Each engine saves and restores its own training state inside a checkpoint folder: DDP's
optimizer and schedule as one file from rank 0, DeepSpeed's as one shard per rank.

The training loop's losses are already normalised for the whole accumulated step, so
neither engine rescales them by the accumulation count.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import torch
from transformers import PreTrainedModel

from jobs.spec import JobSpec
from jobs.train.checkpoint import load_trainer_state, save_trainer_state
from jobs.train.optim import build_optimizer, build_schedule
from jobs.train.zero import DeepSpeedEngine


class Engine(Protocol):
    model: torch.nn.Module  # what forward is called on (may be a wrapper)
    unwrapped: PreTrainedModel
    scheduler: torch.optim.lr_scheduler.LRScheduler | None

    def accumulating(self, last: bool) -> contextlib.AbstractContextManager[None]: ...
    def autocast(self) -> contextlib.AbstractContextManager[None]: ...
    def backward(self, loss: torch.Tensor) -> None: ...
    def step(self) -> torch.Tensor: ...
    def lr(self) -> float: ...
    def save_state(self, folder: Path, rank: int) -> None: ...  # every rank calls it
    def load_state(self, folder: Path) -> None: ...
    def full_model(self) -> contextlib.AbstractContextManager[PreTrainedModel]: ...


class DDPEngine:
    def __init__(self, model: PreTrainedModel, spec: JobSpec, steps: int, device: torch.device):
        import ray.train.torch

        self.unwrapped = model
        self.model = ray.train.torch.prepare_model(model)  # moves to device; DDP if world > 1
        self.optimizer = build_optimizer(model, spec)
        self.scheduler = build_schedule(self.optimizer, spec, steps)
        self.max_grad_norm = spec.train.max_grad_norm
        self.bf16 = spec.train.precision == "bf16"
        self.device = device

    def accumulating(self, last: bool) -> contextlib.AbstractContextManager[None]:
        # DDP all-reduces on every backward unless told not to; only the last micro-batch syncs.
        no_sync = getattr(self.model, "no_sync", None)
        return contextlib.nullcontext() if last or no_sync is None else no_sync()

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self) -> torch.Tensor:
        norm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), self.max_grad_norm or float("inf")
        )
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm

    def lr(self) -> float:
        return float(self.scheduler.get_last_lr()[0])

    def save_state(self, folder: Path, rank: int) -> None:
        if rank == 0:  # DDP keeps the same optimizer state on every rank
            save_trainer_state(folder, self.optimizer, self.scheduler)

    def load_state(self, folder: Path) -> None:
        state = load_trainer_state(folder)
        if state is None:
            return
        self.optimizer.load_state_dict(state["optimizer"])
        if "scheduler" in state:
            self.scheduler.load_state_dict(state["scheduler"])

    @contextlib.contextmanager
    def full_model(self) -> Iterator[PreTrainedModel]:
        yield self.unwrapped


def build_engine(model: PreTrainedModel, spec: JobSpec, steps: int, device: torch.device) -> Engine:
    if spec.scaling.deepspeed is not None:
        return DeepSpeedEngine(model, spec, steps, device)
    return DDPEngine(model, spec, steps, device)
