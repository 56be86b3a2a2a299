"""Pause at a step boundary and resume, through the real worker loop in Ray Train's
in-process mode (no cluster): the resumed run's final metrics equal an uninterrupted run's
bit for bit on CPU. The loss draws Gumbel noise every step, so the random state the
checkpoint carries (jobs/train/pause.py) is part of what is compared."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import ray.train
from ray.train.v2._internal.execution.train_fn_utils import LocalTrainFnUtils

import jobs.train.pause as pause
from jobs.records.models import PAUSE_REQUEST
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec
from jobs.train.runner import build_trainer

# Timings differ, and the paused run's report says where it resumed from.
NOT_COMPARED = {"step_time_s", "resumed_from", "checkpoint"}


def spec() -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "pause",
            "model": {"source": "random:tiny-char", "use_chat_template": False},
            "data": {"task": "arithmetic", "modules": ["add_or_sub"], "train_size": 48,
                     "eval_size": 4, "max_length": 96},
            "loss": {"name": "ntil", "gumbel_noise": 1.0},
            "train": {"steps": 6, "batch_size": 8, "grad_accum": 2, "lr": 0.003,
                      "warmup_steps": 2, "eval_every": 2, "checkpoint_every": 2,
                      "eval_max_new_tokens": 4, "seed": 7},
            "scaling": {"num_workers": 1, "cpus_per_worker": 1},
        }
    )  # fmt: skip


def test_a_paused_run_resumes_to_the_same_final_metrics(
    storage: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pause, "CHECK_EVERY_S", 0.0)  # look every step: the pause step is fixed
    whole = build_trainer(spec(), RunFiles.for_job("whole", str(storage)), in_process=True).fit()
    assert whole.error is None and whole.metrics is not None, whole.error
    assert whole.metrics["step"] == 6

    # The paused run: asked to pause once step 2's checkpoint is reported, so it stops at
    # step 3, a step with no evaluation of its own. In-process Ray Train keeps no copy of a
    # reported checkpoint (its folder is temporary): keep one here, as Ray's storage would.
    files = RunFiles.for_job("paused", str(storage))
    kept: dict[str, Path] = {}
    report = LocalTrainFnUtils.report

    def keeping(self: Any, metrics: dict[str, Any], checkpoint: Any = None, **kw: Any) -> None:
        if checkpoint is not None:
            kept[kw["checkpoint_dir_name"]] = Path(
                shutil.copytree(checkpoint.path, tmp_path / kw["checkpoint_dir_name"])
            )
        if metrics["step"] == 2:
            files.write_text(PAUSE_REQUEST, "{}")
        report(self, metrics, checkpoint=checkpoint, **kw)

    monkeypatch.setattr(LocalTrainFnUtils, "report", keeping)
    stopped = build_trainer(spec(), files, in_process=True).fit()
    assert stopped.error is None and stopped.metrics is not None, stopped.error
    assert stopped.metrics["paused"] is True and stopped.metrics["step"] == 3
    saved = kept["checkpoint_step_0000003"]
    assert (saved / "rng" / "rank_00000.pt").is_file() and (saved / "trainer_state.pt").is_file()

    # Resumed: the same job again, handed that checkpoint as Ray's restore would.
    files.fs.delete_file(f"{files.root}/{PAUSE_REQUEST}")
    monkeypatch.setattr(ray.train, "get_checkpoint", lambda: ray.train.Checkpoint(str(saved)))
    resumed = build_trainer(spec(), files, in_process=True).fit()
    assert resumed.error is None and resumed.metrics is not None, resumed.error
    assert resumed.metrics["resumed_from"] == 3 and "paused" not in resumed.metrics
    expected = {k: v for k, v in whole.metrics.items() if k not in NOT_COMPARED}
    got = {k: v for k, v in resumed.metrics.items() if k not in NOT_COMPARED}
    assert got == expected  # bit for bit: every loss part, the lr, every eval metric
