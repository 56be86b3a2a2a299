"""Pausing a sweep: every running trial stops at its next step boundary with a checkpoint,
then Tune stops the way it stops on SIGUSR1 (its graceful stop), so that the same sweep run
again restores the experiment (`Tuner.restore`) and goes on where each trial was.

The control plane asks by writing `pause.request` into the sweep's run folder, as for a job
(service/jobs/pausing.py). Each trial's training loop watches that same file (the trainer's
`pause_uri` is the sweep's folder, jobs/train/pause.py); a trial whose fit ended paused
writes `trial-<id>/paused.json` (its step and checkpoint) and then waits, alive, for Tune to
stop it: a trial function that returned would read as finished and never run again. The
driver (`PauseSweep`, a Tune callback run between the controller's steps) waits until every
running trial has written its mark, then raises SIGUSR1 in its own process. Tune saves the
experiment state with those trials still running and stops their actors; on restore, Tune
starts them again and each one's Train run (named after its trial) resumes from its latest
checkpoint, the pause's. Finished trials are not run again; trials not yet started start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import threading
import time
from typing import Any, NoReturn

import pyarrow.fs as pafs
from ray.tune import Callback

from jobs.records.models import PAUSE_REQUEST
from jobs.records.run_files import RunFiles

log = logging.getLogger(__name__)

MARK = "paused.json"
LOOK_EVERY_S = 1.0  # the driver stats the request (and the marks) at most this often
TUNE_HANDLER = "signal_interrupt_tune_run"  # ray/tune/tune.py's SIGINT/SIGUSR1 handler


def trial_folder(trial_id: str) -> str:
    """A trial's Train run folder under the sweep's (jobs/tune/sweep.py names it so)."""
    return f"trial-{trial_id}"


def write_mark(files: RunFiles, trial_id: str, step: int, checkpoint: str) -> None:
    """`trial-<id>/paused.json` in the sweep's folder: the trial stopped at `step`."""
    files.fs.create_dir(f"{files.root}/{trial_folder(trial_id)}", recursive=True)
    mark = {"step": step, "checkpoint": checkpoint}
    RunFiles.at(files.sub_uri(trial_folder(trial_id))).write_text(MARK, json.dumps(mark))


def hold_paused(files: RunFiles, trial_id: str, step: int, checkpoint: str) -> NoReturn:
    """Mark the trial paused, then wait for Tune to stop it (its actor is killed)."""
    write_mark(files, trial_id, step, checkpoint)
    log.info("trial %s paused at step %d; waiting for the sweep to stop", trial_id, step)
    while True:
        time.sleep(60)


def marks(files: RunFiles) -> dict[str, dict[str, Any]]:
    """The paused trials' marks, by trial id."""
    found = {}
    for entry in files.fs.get_file_info(pafs.FileSelector(files.root, allow_not_found=True)):
        name = entry.base_name
        if entry.type == pafs.FileType.Directory and name.startswith("trial-"):
            text = files.read_text(f"{name}/{MARK}")
            if text is not None:
                found[name.removeprefix("trial-")] = json.loads(text)
    return found


def clear_marks(files: RunFiles) -> None:
    """Forget an earlier pause's marks (the sweep is running again)."""
    for trial_id in marks(files):
        with contextlib.suppress(FileNotFoundError):
            files.fs.delete_file(f"{files.root}/{trial_folder(trial_id)}/{MARK}")


def stop_tune() -> None:
    """Tune's graceful stop, as SIGUSR1 asks for it. Tune listens only when fit() runs on
    the main thread (as `python -m jobs tune` does); elsewhere the signal would end the
    process, so a sweep that cannot be stopped this way says so instead."""
    handler = signal.getsignal(signal.SIGUSR1)
    listening = getattr(handler, "__name__", "") == TUNE_HANDLER
    if threading.current_thread() is not threading.main_thread() or not listening:
        raise RuntimeError("this sweep cannot pause: Tune's fit() is not on the main thread")
    signal.raise_signal(signal.SIGUSR1)


class PauseSweep(Callback):
    """Stops the sweep once a pause is asked for and every running trial has paused."""

    def __init__(self, uri: str):
        self.uri = uri  # the sweep's run folder (a URI: the callback is pickled with the tuner)
        self.looked = float("-inf")
        self.stopping = False

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        if self.stopping or time.monotonic() - self.looked < LOOK_EVERY_S:
            return
        self.looked = time.monotonic()
        files = RunFiles.at(self.uri)
        if not files.has(PAUSE_REQUEST):
            return
        running = {t.trial_id for t in trials if t.status == "RUNNING"}
        waiting = running - set(marks(files))
        if waiting:
            log.info("sweep pausing: waiting for trials %s to reach a step boundary", waiting)
            return
        log.info("sweep pausing: trials %s paused; stopping Tune", sorted(running))
        self.stopping = True
        stop_tune()
