"""A sweep's side of a pause without Ray running (jobs/tune/pause.py, jobs/tune/sweep.py):
the driver stops Tune only once every running trial has stopped at a step boundary, never
by a signal nobody listens to, and the sweep's result says paused with what it resumes
from. tests/integration/test_tune.py runs the whole of it on a local Ray."""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

import jobs.tune.pause as pause
from jobs.records.models import PAUSE_REQUEST, TrialRow
from jobs.records.run_files import RunFiles
from jobs.spec import TuneSpec
from jobs.tune.sweep import outcome, paused_rows

SPEC = TuneSpec.model_validate(
    {
        "name": "sweep",
        "base": {"name": "trial", "model": {"source": "random:tiny-digit"}},
        "space": {"lr": {"kind": "grid", "values": [1e-3, 3e-3, 1e-2]}},
        "num_samples": 1,
        "asha": None,
    }
)


@dataclass
class Trial:  # what the callback reads of Tune's Trial
    trial_id: str
    status: str


def test_the_driver_stops_tune_once_every_running_trial_has_paused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stops: list[int] = []
    monkeypatch.setattr(pause, "stop_tune", lambda: stops.append(1))
    monkeypatch.setattr(pause, "LOOK_EVERY_S", 0.0)
    files = RunFiles.for_job("sweep", str(tmp_path))
    trials = [Trial("a", "TERMINATED"), Trial("b", "RUNNING"), Trial("c", "RUNNING")]
    watch = pause.PauseSweep(files.uri)
    watch.on_step_begin(0, trials)
    assert stops == []  # nothing asked
    files.write_text(PAUSE_REQUEST, "{}")
    pause.write_mark(files, "b", 3, "ckpt-b")
    watch.on_step_begin(1, trials)
    assert stops == []  # c still runs: stopping now would lose its steps since a checkpoint
    pause.write_mark(files, "c", 5, "ckpt-c")
    watch.on_step_begin(2, trials)
    watch.on_step_begin(3, trials)
    assert stops == [1]  # once

    rows = [
        TrialRow(trial_id=t, config={"lr": 1e-3}, best_metric=None, best_checkpoint=None,
                 last_step=0, status="stopped_early")
        for t in ("b", "c")
    ]  # fmt: skip
    marked = paused_rows(rows, files)
    assert [(r.status, r.last_step) for r in marked] == [("paused", 3), ("paused", 5)]
    result = outcome(SPEC, files, 3, marked)  # Tune counts the trials it stopped as ended
    assert (result.status, result.best_checkpoint) == ("paused", files.sub_uri("tune"))
    assert result.metrics == {"trials_ended": 1, "trials_paused": 2}
    assert result.detail and result.detail.startswith("1 of 3 trials ended, 2 paused")

    pause.clear_marks(files)  # the resumed run forgets them
    assert pause.marks(files) == {}
    files.fs.delete_file(f"{files.root}/{PAUSE_REQUEST}")
    cut = outcome(SPEC, files, 1, rows)  # stopped without a pause asked: interrupted
    assert (cut.status, cut.reason) == ("failed", "interrupted")


def test_tune_is_stopped_only_where_it_listens() -> None:
    # Off the main thread, or with no Tune handler installed, SIGUSR1 would end the
    # process: the sweep says it cannot pause instead.
    errors: list[BaseException] = []

    def off_main() -> None:
        try:
            pause.stop_tune()
        except RuntimeError as error:
            errors.append(error)

    thread = threading.Thread(target=off_main)
    thread.start()
    thread.join()
    assert len(errors) == 1 and "cannot pause" in str(errors[0])
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    try:
        with pytest.raises(RuntimeError, match="cannot pause"):
            pause.stop_tune()
    finally:
        signal.signal(signal.SIGUSR1, previous)
