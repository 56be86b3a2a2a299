"""Ray Tune sweeps on the local Ray: ASHA stops trials and frees them; bad sweeps fail fast."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
import ray
from ray.util import placement_group_table

from jobs.records.models import TuneResult
from jobs.records.run_files import RunFiles
from jobs.spec import TuneSpec, load_spec_file
from jobs.tune.sweep import SweepDoesNotFitError, run_tune

pytestmark = [pytest.mark.ray, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-tune-smmd.yaml"


def _live_placement_groups() -> list[str]:
    return [pg_id for pg_id, pg in placement_group_table().items() if pg["state"] != "REMOVED"]


def test_sweep_stops_trials_early_and_frees_them(ray_cluster: str, storage: Path) -> None:
    # The example's base, bandwidth and weight, made deterministic for the assertion: the
    # first trial learns (lr 3e-3) and runs alone, the two after it barely move
    # (lr 1e-9), so ASHA must cut them at the first rung (step 4) against the first.
    data = load_spec_file(EXAMPLE)
    data["space"]["lr"] = {"kind": "grid", "values": [3e-3, 1e-9, 1e-9]}
    data["num_samples"] = 1
    data["max_concurrent_trials"] = 1
    spec = TuneSpec.model_validate(data)
    result = run_tune(spec, "tiny-sweep", str(storage))

    assert result.status == "succeeded", result
    assert result.trials == 3
    assert Path(result.best_checkpoint or "", "model.safetensors").exists()
    trials = (storage / "runs" / "tiny-sweep" / "trials.json").read_text()
    statuses = sorted(row["status"] for row in json.loads(trials))
    assert statuses == ["completed", "stopped_early", "stopped_early"]
    assert (storage / "runs" / "tiny-sweep" / "trials.png").stat().st_size > 1000

    # Running the same sweep id again restores it and re-runs none of the finished trials:
    # a re-run trial would write new checkpoint folders.
    run = storage / "runs" / "tiny-sweep"
    checkpoints = sorted(str(p.relative_to(run)) for p in run.glob("trial-*/checkpoint_*"))
    assert checkpoints
    again = run_tune(spec, "tiny-sweep", str(storage))
    assert sorted(str(p.relative_to(run)) for p in run.glob("trial-*/checkpoint_*")) == checkpoints
    assert (again.best_trial, again.trials) == (result.best_trial, 3)
    restored = (storage / "runs" / "tiny-sweep" / "trials.json").read_text()

    def by_trial(text: str) -> list[dict[str, object]]:
        return sorted(json.loads(text), key=lambda row: str(row["trial_id"]))

    assert by_trial(restored) == by_trial(trials)  # same trials, same results, any order

    # Every trial's workers and placement groups are gone once the sweep returns.
    deadline = time.monotonic() + 30
    while _live_placement_groups() or ray.available_resources().get("CPU", 0) < 4:
        assert time.monotonic() < deadline, (_live_placement_groups(), ray.available_resources())
        time.sleep(0.5)


def test_sweep_that_cannot_fit_fails_fast(ray_cluster: str, storage: Path) -> None:
    data = load_spec_file(EXAMPLE)
    data["base"]["scaling"] = {"num_workers": 2, "cpus_per_worker": 3}  # 6.01 CPUs > 4
    spec = TuneSpec.model_validate(data)
    with pytest.raises(SweepDoesNotFitError, match=r"needs 6\.01 CPUs.*has 4 CPUs"):
        run_tune(spec, "too-big", str(storage))
    assert not (storage / "runs" / "too-big" / "tune").exists()
    # The control plane learns why from result.json, as for any other end.
    written = RunFiles.for_job("too-big", str(storage)).read_result(TuneResult)
    assert written is not None and (written.status, written.reason) == ("failed", "does_not_fit")


def test_interrupted_sweep_is_not_a_result_and_resumes(ray_cluster: str, storage: Path) -> None:
    # Two trials one at a time, no early stopping. A SIGUSR1 (what Ray Tune takes for a
    # graceful stop, like Ctrl+C) once the first trial has a checkpoint ends fit() normally
    # with trials unfinished: that must be a failed sweep, and the same id must resume it.
    data = load_spec_file(EXAMPLE)
    data["space"]["lr"] = {"kind": "grid", "values": [3e-3, 1e-3]}
    data["num_samples"] = 1
    data["max_concurrent_trials"] = 1
    data["asha"] = None
    spec = TuneSpec.model_validate(data)
    run = storage / "runs" / "cut-sweep"

    returned = threading.Event()

    def interrupt_after_first_checkpoint() -> None:
        deadline = time.monotonic() + 120
        while not list(run.glob("trial-*/checkpoint_*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not returned.is_set():  # fit() still running: its handler takes the signal
            os.kill(os.getpid(), signal.SIGUSR1)

    # A stray SIGUSR1 after fit() must not kill pytest (the default action terminates).
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    watcher = threading.Thread(target=interrupt_after_first_checkpoint, daemon=True)
    watcher.start()
    try:
        cut = run_tune(spec, "cut-sweep", str(storage))
    finally:
        returned.set()
        watcher.join()
        signal.signal(signal.SIGUSR1, previous)
    assert (cut.status, cut.reason) == ("failed", "interrupted"), cut
    assert cut.best_checkpoint is None and re.search(r"\d of 2 trials ended", cut.detail or "")
    assert json.loads((run / "result.json").read_text())["status"] == "failed"

    done = run_tune(spec, "cut-sweep", str(storage))
    assert done.status == "succeeded" and done.trials == 2, done
    rows = json.loads((run / "trials.json").read_text())
    assert sorted(row["status"] for row in rows) == ["completed"] * 2
