"""The step a job goes on from, read from Ray Train's checkpoint record: a record that does
not say is an error, never a silent step 0 (the run would repeat steps its metrics hold)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jobs.records.restore import RUN_NAME, SNAPSHOT, restore_step
from jobs.records.run_files import RunFiles


def with_record(tmp_path: Path, record: Any) -> RunFiles:
    run = RunFiles.for_job("job-1", str(tmp_path))
    (Path(run.root) / RUN_NAME).mkdir()
    (Path(run.root) / RUN_NAME / SNAPSHOT).write_text(json.dumps(record))
    return run


def test_no_record_and_no_checkpoint_yet_mean_step_0(tmp_path: Path) -> None:
    assert restore_step(RunFiles.for_job("job-0", str(tmp_path))) == 0
    assert restore_step(with_record(tmp_path, {"latest_checkpoint_result": None})) == 0


def test_the_latest_checkpoint_s_step(tmp_path: Path) -> None:
    record = {"latest_checkpoint_result": {"checkpoint_dir_name": "c", "metrics": {"step": 40}}}
    assert restore_step(with_record(tmp_path, record)) == 40


@pytest.mark.parametrize(
    "record",
    [
        [],  # not Ray's record at all
        {"latest_checkpoint_result": {"metrics": {}}},
        {"latest_checkpoint_result": {"metrics": {"step": "40"}}},
        {"latest_checkpoint_result": {"metrics": {"step": True}}},
        {"latest_checkpoint_result": {"metrics": {"step": 0}}},
        {"latest_checkpoint_result": "checkpoint_step_40"},
        {"latest_checkpoint_result": {"metrics": [40]}},
    ],
)
def test_a_record_that_does_not_say_is_an_error(tmp_path: Path, record: Any) -> None:
    with pytest.raises(ValueError, match="its latest checkpoint has no step"):
        restore_step(with_record(tmp_path, record))
