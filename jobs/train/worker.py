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
from jobs.spec import JobSpec


class PrecisionUnsupportedError(RuntimeError):
    """bf16 asked for on hardware that cannot run it natively."""


@dataclass(frozen=True)
class Worker:
    """This worker's place in the run."""

    rank: int
    world: int
    device: torch.device


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
    """Rank, world and device; the cores this worker reserved; its seed; bf16 checked."""
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    device = ray.train.torch.get_device()
    check_precision(spec, device)
    if device.type == "cpu":
        # Use the cores this worker reserved, not every core (workers share a node);
        # rounded, not floored: a sweep trial's 1.98 CPUs (0.02 go to its driver) is 2 cores.
        torch.set_num_threads(max(1, round(spec.scaling.cpus_per_worker)))
    torch.manual_seed(spec.train.seed + rank)
    return Worker(rank, world, device)


def check_precision(spec: JobSpec, device: torch.device) -> None:
    """Refuse bf16 where it would silently be emulated or ignored."""
    if spec.train.precision != "bf16":
        return
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise PrecisionUnsupportedError("train.precision: this GPU does not support bf16")
    if device.type == "cpu" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        # Without native bf16 (AVX512-BF16/AMX or AVX512 emulation) it would crawl.
        raise PrecisionUnsupportedError("train.precision: this CPU has no native bf16 support")
