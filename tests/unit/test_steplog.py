"""Rank 0's metrics writer: rows in order, tensors as numbers, failures surfaced."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from jobs.records.models import METRICS
from jobs.records.run_files import RunFiles
from jobs.train.steplog import StepLog, plain


def rows_of(files: RunFiles) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (files.read_text(METRICS) or "").splitlines()]


def test_rows_are_written_in_order_with_tensors_as_numbers(tmp_path: Path) -> None:
    files = RunFiles.for_job("steps", str(tmp_path))
    log = StepLog(files)
    for step in range(1, 201):
        log.put({"step": step, "loss": torch.tensor(step / 4), "lr": 1e-3})
    log.flush()
    rows = rows_of(files)
    assert [r["step"] for r in rows] == list(range(1, 201))
    assert rows[9]["loss"] == 2.5 and isinstance(rows[9]["loss"], float)


def test_put_does_not_wait_for_the_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = RunFiles.for_job("slow", str(tmp_path))
    gate = threading.Event()
    append = RunFiles.append_text

    def slow_append(self: RunFiles, name: str, text: str) -> None:
        gate.wait(timeout=10)
        append(self, name, text)

    monkeypatch.setattr(RunFiles, "append_text", slow_append)
    log = StepLog(files)
    for step in range(5):
        log.put({"step": step})  # returns although the writer is held
    assert files.read_text(METRICS) is None
    gate.set()
    log.flush()
    assert [r["step"] for r in rows_of(files)] == [0, 1, 2, 3, 4]


def test_the_row_is_copied_when_queued(tmp_path: Path) -> None:
    files = RunFiles.for_job("copied", str(tmp_path))
    log = StepLog(files)
    row: dict[str, Any] = {"step": 1}
    log.put(row)
    row["step"] = 2  # the loop reuses its dict
    log.flush()
    assert rows_of(files) == [{"step": 1}]


def test_a_failed_write_is_raised_not_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = RunFiles.for_job("broken", str(tmp_path))

    def gone(self: RunFiles, name: str, text: str) -> None:
        raise OSError("storage unreachable")

    monkeypatch.setattr(RunFiles, "append_text", gone)
    log = StepLog(files)
    log.put({"step": 1})
    with pytest.raises(RuntimeError, match="storage unreachable"):
        log.flush()
    with pytest.raises(RuntimeError, match=METRICS):
        log.put({"step": 2})


def test_without_files_nothing_is_kept(tmp_path: Path) -> None:
    log = StepLog(None)
    log.put({"step": 1})
    log.flush()
    assert not any(tmp_path.iterdir())


def test_plain_converts_only_tensors() -> None:
    assert plain({"a": torch.tensor(1.5), "b": "x", "c": 3}) == {"a": 1.5, "b": "x", "c": 3}


def test_run_files_at_its_own_uri_is_the_same_folder(tmp_path: Path) -> None:
    files = RunFiles.for_job("job-1", str(tmp_path))
    again = RunFiles.at(files.uri)
    again.write_text("x.txt", "hello")
    assert files.read_text("x.txt") == "hello" and again.root == files.root
