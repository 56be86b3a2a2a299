"""What the driver hands every Ray Train worker's loop (jobs/train/runner.py builds it,
jobs/train/loop.py reads it): one typed, frozen record, pickled to each worker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jobs.spec import JobSpec

# Ray Train requires `train_loop_config` to be a dict: its run-state export validates it as
# one (ray.train.v2 RunSettings.train_loop_config: Optional[Dict]) and hands the same dict
# to the loop. The record travels as this one entry of it.
KEY = "loop"


@dataclass(frozen=True)
class TrackingRef:
    """The MLflow run rank 0's writer logs every row to (jobs/tracking/job.py)."""

    uri: str
    run_id: str


@dataclass(frozen=True)
class LoopConfig:
    spec: JobSpec  # the run's (a sweep's trial: the base job with the trial's values)
    run_name: str  # the Ray Train run's name under the run folder: its checkpoints' folder
    # Where a pause request appears (jobs/train/pause.py): the run's folder; for a sweep's
    # trial the sweep's, so that one request pauses every trial.
    pause_uri: str | None = None
    # Rank 0 appends every metrics row to <run_uri>/metrics.jsonl (jobs/train/steplog.py);
    # None where Tune's callbacks make the reports the record instead.
    run_uri: str | None = None
    tracking: TrackingRef | None = None  # None: the job is not tracked

    def for_ray(self) -> dict[str, LoopConfig]:
        """Ray Train's `train_loop_config`: a dict holding this record (see KEY)."""
        return {KEY: self}

    @staticmethod
    def from_ray(config: Mapping[str, object]) -> LoopConfig:
        """The record back out of the dict Ray Train passes the loop."""
        loop = config[KEY]
        if not isinstance(loop, LoopConfig):
            raise TypeError(f"train_loop_config[{KEY!r}] is a {type(loop)}, not a LoopConfig")
        return loop
