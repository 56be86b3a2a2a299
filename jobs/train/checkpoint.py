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

The training state (the last two) is what a run resumes from after a failure or a pause.
Once a job or a sweep has succeeded nothing resumes from it, and it is most of the folder
(AdamW keeps two fp32 moments per weight: 1.08 of a SmolLM2-135M checkpoint's 1.6 GB), so
`drop_training_state` deletes it from every checkpoint of the run; the weights stay.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from jobs.modeling.adapters import save_adapter_files
from jobs.modeling.folders import ADAPTER_CONFIG
from jobs.records.models import SPEC
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec

log = logging.getLogger(__name__)

SPEC_FILE = SPEC  # a checkpoint's spec.json is the same record as its run folder's
METRICS_FILE = "metrics.json"
STATE_FILE = "trainer_state.pt"
STATE_DIR = "deepspeed"  # DeepSpeed's own checkpoint, inside a checkpoint folder


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


def drop_training_state(files: RunFiles) -> int:
    """Delete every checkpoint's training state under the run folder (`STATE_FILE`s and
    `STATE_DIR`s at any depth: a job's checkpoints, a sweep's trials'); returns the bytes
    freed. Call it only once the run has succeeded: a paused or failed run resumes from it.
    A storage error is logged, never raised: the run has succeeded whatever the cleanup does."""
    try:
        return _drop(files)
    except OSError as error:  # pyarrow's filesystem errors (local, S3, GCS) are OSErrors
        log.warning("could not drop the training state of %s: %s", files.uri, error)
        return 0


def _drop(files: RunFiles) -> int:
    found = files.fs.get_file_info(pafs.FileSelector(files.root, recursive=True))
    dirs = [i.path for i in found if i.base_name == STATE_DIR and i.type == pafs.FileType.Directory]
    inside = tuple(f"{d}/" for d in dirs)
    loose = [i.path for i in found if i.base_name == STATE_FILE and not i.path.startswith(inside)]
    gone = {*loose, *(i.path for i in found if i.path.startswith(inside))}
    freed = sum(i.size or 0 for i in found if i.path in gone and i.type == pafs.FileType.File)
    for path in loose:
        files.fs.delete_file(path)
    for path in dirs:
        files.fs.delete_dir(path)
    log.info("dropped the training state of %s: %.1f MB", files.uri, freed / 1e6)
    return freed
