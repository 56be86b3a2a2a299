"""A run whose loss stops being a number must fail, not save and register what it became.

The loss is checked on the device every step (no host sync in the loop); the host reads
the flag only where the loop syncs anyway: at evaluations, before a checkpoint is saved."""

from __future__ import annotations

import torch
import torch.distributed as dist


class DivergedError(RuntimeError):
    """The training loss became inf or NaN; the message names the first such step."""


class Divergence:
    def __init__(self, device: torch.device):
        # [] long: the first step whose loss was not finite, 0 while every loss was.
        self.first = torch.zeros((), dtype=torch.long, device=device)

    def watch(self, step: int, loss: torch.Tensor) -> None:
        """loss: [] the step's total loss (detached)."""
        bad = (self.first == 0) & ~torch.isfinite(loss)
        self.first = torch.where(bad, torch.full_like(self.first, step), self.first)

    def check(self) -> None:
        """DivergedError if any rank saw a non-finite loss; every rank calls it at the same
        steps (the all-reduce is a collective)."""
        first = self.first.clone()
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            dist.all_reduce(first, op=dist.ReduceOp.MAX)
        step = int(first)
        if step:
            raise DivergedError(f"the training loss became inf or NaN at step {step}")
