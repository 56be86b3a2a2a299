"""Pausing a run at a step boundary, and the random state a paused run takes with it.

The control plane asks a running job to pause by writing `pause.request` into its run folder
(service/jobs/reconciler.py). Rank 0 looks for that file between optimizer steps (a stat, at most
once per `every_s`) and, with several workers, broadcasts what it saw, so that every rank
stops at the same step: a report is a barrier, and ranks that disagreed would hang in it.
The loop then evaluates and checkpoints that step, marks the report `paused`, and returns;
the Ray job ends and gives back every resource. Resuming is the same job run again: Ray
Train's checkpoint manager hands the loop that checkpoint (`ray.train.get_checkpoint()`).

A checkpoint holds the model, optimizer and schedule (jobs/train/checkpoint.py); the data
position is its step (the loop skips the micro-batches already used). What else makes the
rest of the run equal to an uninterrupted one is torch's random state on each rank (dropout,
NTIL's Gumbel noise), saved here per rank as `rng/rank_<r>.pt`. An evaluation that runs only
because of the pause draws nothing from it (`quiet_rng`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist

from jobs.records.models import PAUSE_REQUEST
from jobs.records.run_files import RunFiles

__all__ = ["PAUSE_REQUEST", "PauseWatch", "load_rng_state", "quiet_rng", "save_rng_state"]
RNG_DIR = "rng"
CHECK_EVERY_S = (
    0.5  # rank 0 stats the request file at most this often (a stat on s3 is a round trip)
)


class PauseWatch:
    """Whether a pause was asked for, the same answer on every rank at the same step."""

    def __init__(self, pause_uri: str | None, rank: int, world: int):
        # Only rank 0 reads storage. A sweep's trials watch the sweep's folder (one request
        # pauses them all: jobs/tune/pause.py).
        self.files = RunFiles.at(pause_uri) if pause_uri and rank == 0 else None
        self.world = world
        self.looked = float("-inf")

    def requested(self) -> bool:
        seen = False
        if self.files is not None and time.monotonic() - self.looked >= CHECK_EVERY_S:
            self.looked = time.monotonic()
            seen = self.files.has(PAUSE_REQUEST)
        if self.world > 1 and dist.is_available() and dist.is_initialized():
            flag = torch.tensor([int(seen)], dtype=torch.int32)  # [1], on CPU: gloo or nccl
            if dist.get_backend() == "nccl":
                flag = flag.cuda()
            dist.broadcast(flag, src=0)
            seen = bool(flag.item())
        return seen


def rng_file(rank: int) -> str:
    return f"{RNG_DIR}/rank_{rank:05d}.pt"


def _rng_now() -> dict[str, torch.Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


# Inside `quiet_rng`: the state the run had when the block began, the one its checkpoint saves.
_pinned: list[dict[str, torch.Tensor]] = []


def save_rng_state(folder: Path, rank: int) -> None:
    """This rank's torch random state (CPU, and CUDA where there is one) in a checkpoint:
    the state where the run goes on (inside `quiet_rng`, the one from before the block)."""
    state = _pinned[-1] if _pinned else _rng_now()
    path = folder / rng_file(rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)


def load_rng_state(folder: Path, rank: int) -> bool:
    """Put this rank's saved random state back; False for a checkpoint saved without it."""
    path = folder / rng_file(rank)
    if not path.is_file():
        return False
    state = torch.load(path, map_location="cpu", weights_only=True)
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
    return True


@contextlib.contextmanager
def quiet_rng(enabled: bool) -> Iterator[None]:
    """Run the block without moving torch's random state (an evaluation only the pause
    asked for: the uninterrupted run does not run it, so must not see its draws)."""
    if not enabled:
        yield
        return
    devices = [torch.cuda.current_device()] if torch.cuda.is_initialized() else []
    _pinned.append(_rng_now())
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        _pinned.pop()
