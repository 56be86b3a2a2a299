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

from jobs.modeling.precision import resolve_precision
from jobs.spec import JobSpec
from jobs.spec.parts import ResolvedPrecision
from jobs.train.checkpoint import load_trainer_state, save_trainer_state
from jobs.train.master import MasterWeights
from jobs.train.optim import adamw, build_schedule, trainable_parameters
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
    """`precision` (resolved, jobs/modeling/precision.py): fp32; bf16, autocast around each
    forward; bf16_weights, the model held in bfloat16 and AdamW stepping its float32 master
    copies (jobs/train/master.py)."""

    def __init__(
        self,
        model: PreTrainedModel,
        spec: JobSpec,
        steps: int,
        device: torch.device,
        precision: ResolvedPrecision,
    ):
        import ray.train.torch

        if precision == "bf16_weights":
            # Before DDP, so its gradient buckets are bf16 too.
            torch.nn.Module.to(model, torch.bfloat16)
        self.unwrapped = model
        self.model = ray.train.torch.prepare_model(model)  # moves to device; DDP if world > 1
        params = trainable_parameters(model)
        self.master = MasterWeights(params) if precision == "bf16_weights" else None
        self.optimizer = adamw(self.master.params if self.master else params, spec)
        self.scheduler = build_schedule(self.optimizer, spec, steps)
        self.max_grad_norm = spec.train.max_grad_norm
        self.autocast_bf16 = precision == "bf16"
        self.device = device

    def accumulating(self, last: bool) -> contextlib.AbstractContextManager[None]:
        # DDP all-reduces on every backward unless told not to; only the last micro-batch syncs.
        no_sync = getattr(self.model, "no_sync", None)
        return contextlib.nullcontext() if last or no_sync is None else no_sync()

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast_bf16)

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self) -> torch.Tensor:
        if self.master is not None:
            self.master.pull_grads()  # clipped and stepped in float32
        params = self.master.params if self.master else self.model.parameters()
        norm = torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm or float("inf"))
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.master is not None:
            self.master.push_weights()
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


def build_engine(
    model: PreTrainedModel,
    spec: JobSpec,
    steps: int,
    device: torch.device,
    precision: ResolvedPrecision | None = None,
) -> Engine:
    """The job's engine in `precision` (the worker's resolved one; None: the spec's, resolved
    on `device`)."""
    if precision is None:
        precision = resolve_precision(spec.train.precision, device)
    if spec.scaling.deepspeed is not None:
        return DeepSpeedEngine(model, spec, steps, device, precision)
    return DDPEngine(model, spec, steps, device, precision)
