"""One training-step interface over the two ways numtune distributes a model.

`DDPEngine`: Ray Train's `prepare_model` (DDP over gloo on CPU, nccl on GPU), AdamW, an HF
schedule, gradient clipping. `DeepSpeedEngine`: a ZeRO stage 1/2/3 engine (optional CPU
offload) over the process group Ray Train already set up, with a plain torch AdamW so no
DeepSpeed optimizer op has to compile (that took ~90 s on a fresh machine).

The training loop's losses are already normalised for the whole accumulated step, so
neither engine rescales them by the accumulation count.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

import torch
from transformers import PreTrainedModel, get_scheduler

from jobs.spec import JobSpec

SCHEDULES = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}


class Engine(Protocol):
    model: torch.nn.Module  # what forward is called on (may be a wrapper)
    unwrapped: PreTrainedModel
    scheduler: torch.optim.lr_scheduler.LRScheduler | None

    def accumulating(self, last: bool) -> contextlib.AbstractContextManager[None]: ...
    def autocast(self) -> contextlib.AbstractContextManager[None]: ...
    def backward(self, loss: torch.Tensor) -> None: ...
    def step(self) -> torch.Tensor: ...
    def lr(self) -> float: ...
    def load_state(self, state: dict[str, Any]) -> None: ...
    def full_model(self) -> contextlib.AbstractContextManager[PreTrainedModel]: ...
    def optimizer_for_checkpoint(self) -> torch.optim.Optimizer | None: ...


def _optimizer(model: torch.nn.Module, spec: JobSpec) -> torch.optim.Optimizer:
    return torch.optim.AdamW(
        model.parameters(), lr=spec.train.lr, weight_decay=spec.train.weight_decay
    )


def _scheduler(opt: torch.optim.Optimizer, spec: JobSpec, steps: int) -> Any:
    return get_scheduler(
        SCHEDULES[spec.train.schedule],
        opt,
        num_warmup_steps=spec.train.warmup_steps,
        num_training_steps=steps,
    )


class DDPEngine:
    def __init__(self, model: PreTrainedModel, spec: JobSpec, steps: int, device: torch.device):
        import ray.train.torch

        self.unwrapped = model
        self.model = ray.train.torch.prepare_model(model)  # moves to device; DDP if world > 1
        self.optimizer = _optimizer(model, spec)
        self.scheduler = _scheduler(self.optimizer, spec, steps)
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

    def load_state(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        if "scheduler" in state:
            self.scheduler.load_state_dict(state["scheduler"])

    @contextlib.contextmanager
    def full_model(self) -> Iterator[PreTrainedModel]:
        yield self.unwrapped

    def optimizer_for_checkpoint(self) -> torch.optim.Optimizer | None:
        return self.optimizer


class DeepSpeedEngine:
    def __init__(self, model: PreTrainedModel, spec: JobSpec, steps: int, device: torch.device):
        import deepspeed

        ds = spec.scaling.deepspeed
        assert ds is not None
        zero: dict[str, Any] = {"stage": ds.stage}
        if ds.offload_optimizer:
            zero["offload_optimizer"] = {"device": "cpu"}
        if ds.offload_params:
            zero["offload_param"] = {"device": "cpu"}
        config: dict[str, Any] = {
            "train_micro_batch_size_per_gpu": spec.train.batch_size,
            "gradient_accumulation_steps": spec.train.grad_accum,
            "zero_optimization": zero,
            "bf16": {"enabled": spec.train.precision == "bf16"},
            "zero_allow_untested_optimizer": True,
        }
        if spec.train.max_grad_norm is not None:
            config["gradient_clipping"] = spec.train.max_grad_norm
        optimizer = _optimizer(model, spec)
        self.unwrapped = model
        self.stage = ds.stage
        # The schedule wraps the base AdamW; DeepSpeed steps it at accumulation boundaries.
        self.scheduler = _scheduler(optimizer, spec, steps)
        self.ds, _, _, _ = deepspeed.initialize(
            model=torch.nn.Module.to(model, device),
            optimizer=optimizer,
            lr_scheduler=self.scheduler,
            config=config,
        )
        self.model = self.ds

    def accumulating(self, last: bool) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # DeepSpeed counts micro-steps itself

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # precision is the engine's (bf16 config)

    def backward(self, loss: torch.Tensor) -> None:
        self.ds.backward(loss, scale_wrt_gas=False)
        self.ds.step()  # a no-op until the accumulation boundary

    def step(self) -> torch.Tensor:
        norm = self.ds.get_global_grad_norm()
        return torch.tensor(float("nan") if norm is None else float(norm))

    def lr(self) -> float:
        return float(self.scheduler.get_last_lr()[0])

    def load_state(self, state: dict[str, Any]) -> None:
        # Weights come from the checkpoint; ZeRO's sharded optimizer state does not.
        if "scheduler" in state:
            self.scheduler.load_state_dict(state["scheduler"])

    @contextlib.contextmanager
    def full_model(self) -> Iterator[PreTrainedModel]:
        if self.stage != 3:
            yield self.unwrapped
            return
        import deepspeed

        # ZeRO-3 shards parameters: gather them (a collective, so every rank enters).
        with deepspeed.zero.GatheredParameters(list(self.unwrapped.parameters())):
            yield self.unwrapped

    def optimizer_for_checkpoint(self) -> torch.optim.Optimizer | None:
        return None


def build_engine(model: PreTrainedModel, spec: JobSpec, steps: int, device: torch.device) -> Engine:
    if spec.scaling.deepspeed is not None:
        return DeepSpeedEngine(model, spec, steps, device)
    return DDPEngine(model, spec, steps, device)
