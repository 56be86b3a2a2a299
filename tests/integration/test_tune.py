"""Ray Tune sweeps on the local Ray: ASHA stops trials and frees them; bad sweeps fail fast;
an interrupted or paused sweep resumes."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ray
import torch
from ray.util import placement_group_table

from jobs.records.models import PAUSE_REQUEST, TuneResult
from jobs.records.run_files import RunFiles
from jobs.spec import TuneSpec, load_spec_file
from jobs.train.runner import build_trainer
from jobs.tune.sweep import SweepDoesNotFitError, run_tune

pytestmark = [pytest.mark.ray, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-tune-smmd.yaml"
# Timings differ, a resumed trial says where it resumed from, checkpoints live elsewhere.
NOT_COMPARED = {"step_time_s", "resumed_from", "checkpoint"}


def _live_placement_groups() -> list[str]:
    return [pg_id for pg_id, pg in placement_group_table().items() if pg["state"] != "REMOVED"]


def _wait_until_all_free() -> None:
    deadline = time.monotonic() + 30
    while _live_placement_groups() or ray.available_resources().get("CPU", 0) < 4:
        assert time.monotonic() < deadline, (_live_placement_groups(), ray.available_resources())
        time.sleep(0.5)


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
    # A finished sweep never resumes: every trial's optimizer state is gone, its weights stay.
    assert not list((storage / "runs" / "tiny-sweep").rglob("trainer_state.pt"))

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
    _wait_until_all_free()


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


def two_trials(**space: object) -> TuneSpec:
    """The example's base: two trials (lr 3e-3, 1e-3) one at a time, no early stopping."""
    data = load_spec_file(EXAMPLE)
    data["space"].update(space, lr={"kind": "grid", "values": [3e-3, 1e-3]})
    data["num_samples"] = 1
    data["max_concurrent_trials"] = 1
    data["asha"] = None
    return TuneSpec.model_validate(data)


def _tune_history(run: Path) -> dict[str, list[dict[str, Any]]]:
    """Every result Tune recorded, by trial id (each trial's result.json, one row a line)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((run / "tune").glob("*/result.json")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            rows.setdefault(str(row["trial_id"]), []).append(row)
    return rows


Watch = Callable[[threading.Event], None]  # told when the sweep has returned


def _watched(spec: TuneSpec, run: Path, storage: Path, watch: Watch) -> TuneResult:
    """Run the sweep with `watch` on a thread beside it (it acts on the sweep's files)."""
    returned = threading.Event()
    watcher = threading.Thread(target=watch, args=(returned,), daemon=True)
    watcher.start()
    try:
        return run_tune(spec, run.name, str(storage))
    finally:
        returned.set()
        watcher.join()


def _wait_for(found: Callable[[], bool], returned: threading.Event) -> bool:
    """Whether `found` came true while the sweep still ran (never on a loaded machine's
    slow start alone: then the sweep ends as it would have, and the test says so)."""
    while not found():
        if returned.wait(0.1):
            return False
    return not returned.is_set()


def _interrupted(spec: TuneSpec, run: Path, storage: Path) -> TuneResult:
    """The sweep, sent a SIGUSR1 (what Ray Tune takes for a graceful stop, like Ctrl+C) once
    its first trial has a checkpoint: fit() returns normally with trials unfinished."""

    def interrupt_after_first_checkpoint(returned: threading.Event) -> None:
        if _wait_for(lambda: bool(list(run.glob("trial-*/checkpoint_*"))), returned):
            os.kill(os.getpid(), signal.SIGUSR1)  # fit() runs: its handler takes the signal

    # A stray SIGUSR1 after fit() must not kill pytest (the default action terminates).
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    try:
        return _watched(spec, run, storage, interrupt_after_first_checkpoint)
    finally:
        signal.signal(signal.SIGUSR1, previous)


def _paused(spec: TuneSpec, run: Path, storage: Path) -> TuneResult:
    """The sweep, asked to pause (as service/jobs/pausing.py hands it over) as its second trial
    starts (its Train folder appears): that trial stops at its first step boundary."""
    files = RunFiles.for_job(run.name, str(storage))

    def pause_as_the_second_trial_starts(returned: threading.Event) -> None:
        if _wait_for(lambda: len(list(run.glob("trial-*"))) >= 2, returned):
            files.write_text(PAUSE_REQUEST, "{}")

    return _watched(spec, run, storage, pause_as_the_second_trial_starts)


def test_interrupted_or_paused_sweep_resumes_where_each_trial_was(
    ray_cluster: str, storage: Path
) -> None:
    # Two trials one at a time on a grid (deterministic). 1: interrupted during the first
    # trial: not a result. 2: resumed (Tune's restore), then paused as the second starts.
    # 3: resumed again: it finishes where an uninterrupted sweep would.
    spec = two_trials(
        bandwidth={"kind": "grid", "values": [2.0]}, weight={"kind": "grid", "values": [0.5]}
    )
    run = storage / "runs" / "cut-sweep"
    files = RunFiles.for_job(run.name, str(storage))
    cut = _interrupted(spec, run, storage)
    assert (cut.status, cut.reason) == ("failed", "interrupted"), cut
    assert cut.best_checkpoint is None and re.search(r"\d of 2 trials ended", cut.detail or "")
    assert json.loads((run / "result.json").read_text())["status"] == "failed"

    paused = _paused(spec, run, storage)
    assert paused.status == "paused", paused
    assert paused.best_checkpoint == files.sub_uri("tune") and paused.trials == 2
    assert paused.metrics == {"trials_ended": 1, "trials_paused": 1}, paused
    rows = {row["status"]: row for row in json.loads((run / "trials.json").read_text())}
    assert sorted(rows) == ["completed", "paused"], rows
    stopped_at, paused_id = rows["paused"]["last_step"], str(rows["paused"]["trial_id"])
    assert 1 <= stopped_at < 16
    # Paused, the sweep holds nothing: every trial's actors and placement groups are gone.
    _wait_until_all_free()
    first = run / f"trial-{rows['completed']['trial_id']}"
    first_files = sorted(str(p.relative_to(first)) for p in first.rglob("checkpoint_*/*"))
    assert any(p.endswith("trainer_state.pt") for p in first_files)  # paused: kept to resume

    # Resumed: the service removes the request and submits the same sweep again.
    files.fs.delete_file(f"{files.root}/{PAUSE_REQUEST}")
    done = run_tune(spec, run.name, str(storage))
    assert done.status == "succeeded" and done.trials == 2, done
    statuses = [row["status"] for row in json.loads((run / "trials.json").read_text())]
    assert statuses == ["completed"] * 2
    # The finished trial did not run again; the paused one went on from its step.
    # (less its optimizer state, dropped once the sweep succeeded)
    kept = [p for p in first_files if not p.endswith("trainer_state.pt")]
    assert sorted(str(p.relative_to(first)) for p in first.rglob("checkpoint_*/*")) == kept
    history = _tune_history(run)
    second = history[paused_id]
    assert [r["resumed_from"] for r in second] == [stopped_at] * len(second)  # none before it
    assert {results[-1]["step"] for results in history.values()} == {16}

    # What the paused trial reports uninterrupted: its job run whole (Ray Train's in-process
    # mode, one thread as in Ray's workers). Same final metrics bit for bit, and so the same
    # best trial as an uninterrupted sweep.
    config = {k: second[-1]["config"][k] for k in spec.space}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        job = spec.trial_spec(config)
        whole = build_trainer(job, RunFiles.for_job("whole", str(storage)), in_process=True)
        metrics = whole.fit().metrics or {}
    finally:
        torch.set_num_threads(threads)
    assert {k: second[-1][k] for k in metrics if k not in NOT_COMPARED} == {
        k: v for k, v in metrics.items() if k not in NOT_COMPARED
    }
    finals = {trial_id: results[-1][spec.metric_key] for trial_id, results in history.items()}
    assert finals[paused_id] == metrics[spec.metric_key]
    assert done.best_trial == min(finals, key=lambda t: finals[t])
