"""Where a job goes on from when it is submitted again under its own run folder, and its
metrics cut back to that step.

Ray Train restores a run (the same `RunConfig` name under the same storage path) from the
latest checkpoint its checkpoint manager recorded in `<run>/checkpoint_manager_snapshot.json`
(Ray writes it after each reported checkpoint), with the metrics reported beside it; ours
always carry `step`. A job that Ray lost with its head part-way through goes on from there
(service/jobs/requeueing.py). The rows it had written to `metrics.jsonl` after that step would
be written again by the resumed run, so they are cut first: the record then reads as one run.
"""

from __future__ import annotations

from typing import Any

from jobs.records.run_files import RunFiles

SNAPSHOT = "checkpoint_manager_snapshot.json"
RUN_NAME = "train"  # a job's Ray Train run under its folder (jobs/train/runner.py)


def restore_step(files: RunFiles, run_name: str = RUN_NAME) -> int:
    """The step the run's latest recorded checkpoint holds; 0 when it has none (it starts
    again from the spec's model). Raises ValueError for a snapshot that does not say."""
    state: Any = files.read_json(f"{run_name}/{SNAPSHOT}")
    if state is None:
        return 0  # no checkpoint reported yet
    latest = state.get("latest_checkpoint_result") if isinstance(state, dict) else {}
    if latest is None:
        return 0
    metrics = latest.get("metrics") if isinstance(latest, dict) else None
    step = metrics.get("step") if isinstance(metrics, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 1:
        raise ValueError(f"{files.uri}/{run_name}/{SNAPSHOT}: its latest checkpoint has no step")
    return step


def cut_metrics(files: RunFiles, step: int) -> int:
    """Keep the rows of `metrics.jsonl` before the first one past `step`; return how many.

    A restart inside the run (Ray Train's `max_failures`) appends from its checkpoint, so
    rows from an earlier attempt past `step` are cut as well, and the kept prefix is exactly
    what the run had written when it was at `step`."""
    rows = files.read_metrics()
    kept = next((i for i, row in enumerate(rows) if row.step > step), len(rows))
    if kept < len(rows):
        files.write_metrics(rows[:kept])
    return kept
