"""Rank 0's metrics rows, appended to the run's `metrics.jsonl` by a background thread.

Ray Train's `report` is a barrier across the workers and a round trip to its controller
(whose health check polls every `RAY_TRAIN_HEALTH_CHECK_INTERVAL_S`): called every step it
cost a job ~20 % of its step time. So the training loop reports to Ray only where Ray
needs to know — evaluations (Tune's schedulers, the best-checkpoint choice) and
checkpoints — and every row, log steps and reports alike, reaches `metrics.jsonl` from
here: one writer, rows in step order, the file write and the tensors' conversion to
numbers (a device sync on GPU) off the training thread.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import torch

from jobs.records.models import METRICS, MetricsRow
from jobs.records.run_files import RunFiles

log = logging.getLogger(__name__)


def plain(row: dict[str, Any]) -> dict[str, Any]:
    """The row with every tensor as a Python number (what JSON and Ray take)."""
    return {k: float(v) if isinstance(v, torch.Tensor) else v for k, v in row.items()}


class StepLog:
    """Queue rows with `put` (never blocks on I/O); `flush` waits until all are written.

    Built with `files=None` (ranks other than 0, Tune trials whose rows go to Tune) it
    keeps nothing. A failed write is raised by the next `put` or `flush`, not lost. A `sink`
    (MLflow's run, jobs/tracking/job.py) gets each written batch from the same thread; it must
    not raise (tracking never fails the job).
    """

    def __init__(
        self, files: RunFiles | None, sink: Callable[[list[MetricsRow]], None] | None = None
    ):
        self.files = files
        self.sink = sink
        self._rows: queue.Queue[dict[str, Any]] = queue.Queue()
        self._error: OSError | None = None
        if files is not None:
            threading.Thread(target=self._drain, name="numtune-steplog", daemon=True).start()

    def put(self, row: dict[str, Any]) -> None:
        if self.files is None:
            return
        self._raise_failed()
        # A shallow copy: the loop goes on filling its own dict; tensors are detached.
        self._rows.put(dict(row))

    def flush(self) -> None:
        if self.files is not None:
            self._rows.join()
            self._raise_failed()

    def _raise_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"writing {METRICS} failed: {self._error}") from self._error

    def _drain(self) -> None:
        assert self.files is not None
        while True:
            batch = [self._rows.get()]
            while not self._rows.empty():  # rows queued meanwhile go in the same write
                batch.append(self._rows.get_nowait())
            try:
                if self._error is None:
                    rows = [MetricsRow.model_validate(plain(row)) for row in batch]
                    self.files.append_metrics(rows)
                    if self.sink is not None:
                        self.sink(rows)
                    for row in rows:
                        shown = {
                            k: round(v, 4) for k, v in row.as_dict().items() if isinstance(v, float)
                        }
                        log.info("step %s %s", row.step, shown)
            except OSError as error:  # the storage went away: surfaced to the loop
                self._error = error
            finally:
                for _ in batch:
                    self._rows.task_done()
