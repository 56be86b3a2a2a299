"""One Ray Train worker's context (jobs/train/loop.py, step 1) and what the loop's steps
share: the spec, the worker's place in the run, the tokenizer, the numeric loss, the data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray.train
import ray.train.torch
import torch

from jobs.data import Example
from jobs.data.tokenize import Row
from jobs.losses import NumericVocab
from jobs.losses.core import NumericLoss
from jobs.modeling.precision import bf16_available, resolve_precision
from jobs.spec import JobSpec
from jobs.spec.parts import ResolvedPrecision


class PrecisionUnsupportedError(RuntimeError):
    """bf16 asked for on hardware that cannot run it natively."""


@dataclass(frozen=True)
class Worker:
    """This worker's place in the run."""

    rank: int
    world: int
    device: torch.device
    precision: ResolvedPrecision  # train.precision, `auto` resolved on this device


@dataclass(frozen=True)
class Job:
    """What the loop's steps read and never change: the spec, this worker, the tokenizer, the
    numeric loss, this rank's training rows and the held-out set (examples, and their rows)."""

    spec: JobSpec
    worker: Worker
    tokenizer: Any
    vocab: NumericVocab
    loss_fn: NumericLoss
    train_rows: list[Row]
    eval_examples: list[Example]
    eval_rows: list[Row]


def start_worker(spec: JobSpec) -> Worker:
    """Rank, world and device; the cores this worker reserved; its seed; its precision."""
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    device = ray.train.torch.get_device()
    precision = worker_precision(spec, device)
    if device.type == "cpu":
        # Use the cores this worker reserved, not every core (workers share a node);
        # rounded, not floored: a sweep trial's 1.98 CPUs (0.02 go to its driver) is 2 cores.
        torch.set_num_threads(max(1, round(spec.scaling.cpus_per_worker)))
    torch.manual_seed(spec.train.seed + rank)
    return Worker(rank, world, device, precision)


def worker_precision(spec: JobSpec, device: torch.device) -> ResolvedPrecision:
    """The precision this worker trains in: the spec's, `auto` resolved on its device (fp32
    for DeepSpeed off GPUs, whose bf16 mode needs them). An explicit bf16 is refused where it
    would silently be emulated in software or ignored."""
    if spec.train.precision == "auto" and spec.scaling.deepspeed and device.type != "cuda":
        return "fp32"
    precision = resolve_precision(spec.train.precision, device)
    if precision != "fp32" and not bf16_available(device):
        # Without bf16 kernels (AVX512-BF16/AMX, or AVX512 emulation; a GPU's) it would crawl.
        kind = "GPU" if device.type == "cuda" else "CPU"
        raise PrecisionUnsupportedError(f"train.precision: this {kind} does not support bf16")
    return precision
