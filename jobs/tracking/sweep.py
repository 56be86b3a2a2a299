"""MLflow tracking of a sweep: a parent run for the sweep, a child run per trial.

The trials are logged by Ray's own MLflowLoggerCallback (its params are the trial's sampled
values, its metrics Tune's results), in the sweep's driver, with MLflow's parent-run tag on
each. Importing Ray's integration imports mlflow, so it happens inside `trial_runs`, which
runs only with a tracking URI (jobs/tune/sweep.py asks `open_sweep` for nothing otherwise).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from ray.air.constants import TRAINING_ITERATION

from jobs.spec import TuneSpec
from jobs.tracking.job import RunLog, flat_params, job_tags, tracking_errors, tracking_uri

log = logging.getLogger(__name__)

SWEEP_TAG = "numtune.sweep_id"  # on the children (the job-id tag finds the parent alone)


@functools.cache
def trial_runs_class() -> type[Any]:
    """Ray's MLflow callback with two changes: a trial's results are logged at the training
    `step` they were reported at (the axis a job's own run uses; Ray's default is Tune's
    iteration count), and a failure to reach MLflow is logged and stops tracking instead of
    failing the sweep. Built on first use: its base class's module imports mlflow."""
    from ray.air.integrations.mlflow import MLflowLoggerCallback

    class TrialRuns(MLflowLoggerCallback):
        def __init__(self, uri: str, experiment: str, tags: dict[str, str]):
            super().__init__(
                tracking_uri=uri, registry_uri=uri, experiment_name=experiment, tags=tags
            )
            self.on = True

        def _safely(self, what: str, call: Callable[[], object]) -> None:
            if not self.on:
                return
            try:
                call()
            except tracking_errors() as error:
                self.on = False
                log.warning("MLflow tracking of the trials off (%s failed): %s", what, error)

        def setup(self, *args: Any, **kwargs: Any) -> None:
            self._safely("setup", lambda: MLflowLoggerCallback.setup(self, *args, **kwargs))

        def log_trial_start(self, trial: Any) -> None:
            self._safely("trial start", lambda: MLflowLoggerCallback.log_trial_start(self, trial))

        def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
            step = int(result.get("step") or result[TRAINING_ITERATION])
            self._safely(
                "trial result",
                lambda: self.mlflow_util.log_metrics(
                    run_id=self._trial_runs[trial], metrics_to_log=result, step=step
                ),
            )

        def log_trial_end(self, trial: Any, failed: bool = False) -> None:
            self._safely(
                "trial end", lambda: MLflowLoggerCallback.log_trial_end(self, trial, failed)
            )

    return TrialRuns


def open_sweep(spec: TuneSpec, tune_id: str) -> tuple[RunLog | None, list[Any]]:
    """The sweep's parent run (the whole TuneSpec as params) and the callback that logs its
    trials as children; (None, []) when MLflow cannot be reached."""
    tracking = spec.base.tracking
    uri = tracking_uri(tracking)
    assert uri is not None  # jobs/tune/sweep.py calls this only with one
    tags = job_tags(spec.base, "tune")
    parent = RunLog.open(
        uri,
        experiment=tracking.experiment,
        job_id=tune_id,
        tags=tags,
        params=flat_params(spec.model_dump(mode="json")),
    )
    if parent is None:
        return None, []
    children = {
        **tags,
        "numtune.kind": "trial",
        SWEEP_TAG: tune_id,
        "mlflow.parentRunId": parent.run_id,
    }
    return parent, [trial_runs_class()(uri, tracking.experiment, children)]
