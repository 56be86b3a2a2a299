"""A succeeded run's checkpoints lose their training state (optimizer, schedule, DeepSpeed's
shards) and keep everything that serves: jobs/train/checkpoint.py drop_training_state."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from jobs.records.run_files import RunFiles
from jobs.train.checkpoint import STATE_DIR, STATE_FILE, drop_training_state

KEPT = ("model.safetensors", "config.json", "spec.json", "metrics.json")
CHECKPOINTS = ("checkpoint_000000", "checkpoint_000001", "trial-a/checkpoint_000000")


def _write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def test_every_checkpoints_state_goes_and_the_weights_stay(tmp_path: Path) -> None:
    files = RunFiles.for_job("job-1", str(tmp_path))
    run = Path(files.root)
    # a job's two checkpoints (DDP), a sweep trial's (ZeRO: shards under deepspeed/)
    for ckpt in CHECKPOINTS:
        for name in KEPT:
            _write(run / ckpt / name, 10)
    _write(run / "checkpoint_000000" / STATE_FILE, 300)
    _write(run / "checkpoint_000001" / STATE_FILE, 300)
    shards = run / "trial-a/checkpoint_000000" / STATE_DIR / "state"
    _write(shards / "zero_pp_rank_0_mp_rank_00_optim_states.pt", 200)
    _write(shards / "zero_pp_rank_1_mp_rank_00_optim_states.pt", 200)
    _write(shards / STATE_FILE, 7)  # a state file inside a state folder: counted once

    assert drop_training_state(files) == 300 + 300 + 200 + 200 + 7
    left = sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())
    assert left == sorted(f"{c}/{n}" for c in CHECKPOINTS for n in KEPT)
    assert drop_training_state(files) == 0  # nothing left to drop


class _Refusing:
    """A store that lists but refuses to delete (a bucket without delete rights)."""

    def __init__(self) -> None:
        self.local = pafs.LocalFileSystem()

    def get_file_info(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return self.local.get_file_info(selector)

    def delete_file(self, path: str) -> None:
        raise PermissionError(f"{path}: access denied")


def test_a_storage_error_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    local = RunFiles.for_job("job-2", str(tmp_path))
    state = Path(local.root) / "checkpoint_000000" / STATE_FILE
    _write(state, 5)
    files = RunFiles(_Refusing(), local.root, local.uri)
    with caplog.at_level(logging.WARNING, logger="jobs.train.checkpoint"):
        assert drop_training_state(files) == 0  # the run has succeeded all the same
    assert "could not drop the training state" in caplog.text and "access denied" in caplog.text
    assert state.exists()
