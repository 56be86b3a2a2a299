"""MLflow tracking of a job: on only when a tracking URI is configured, else nothing loads.

The URI is the spec's `tracking.mlflow_uri`, else the operator's NUMTUNE_MLFLOW_URI: the
service's setting at submit (service/jobs/tracking.py calls `with_tracking_uri` here with it), or
the job's environment (a job run by hand). `tracking_uri` is the one place that decides it.
Who does what:

  - the driver (jobs/train/runner.py) opens the job's run — the flattened spec as params, the job
    id, owner and loss as tags — and at the end logs the best checkpoint's metrics and closes
    it, FINISHED or FAILED;
  - rank 0's metrics writer (jobs/train/steplog.py) sends every row to that run, by its id, from
    its background thread: MLflow gets every step and the training thread does no more work;
  - a sweep is a parent run whose trials Ray's own MLflowLoggerCallback logs as child runs
    (jobs/tracking/sweep.py); the registry mirrors versions and aliases (service/registry/).

`import mlflow` happens only here, inside functions that run only with a URI: a job without
the setting never loads it (tests/unit/test_tracking.py checks in a fresh interpreter).
Tracking is a copy of the job's own records, so a failure to reach MLflow is logged and
tracking stops for that process; it never fails the job.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jobs.records.models import MetricsRow
from jobs.spec import JobSpec, TrackingSpec

log = logging.getLogger(__name__)

TRACKING_ENV = "NUMTUNE_MLFLOW_URI"
JOB_TAG = "numtune.job_id"  # finds a job's run again: a rerun resumes it, the registry links it
BEST_PREFIX = "best_"
PARAM_MAX_CHARS = 6000  # MLflow's limit on a param value
BATCH_PARAMS = 100  # MLflow's limits per log_batch call
BATCH_METRICS = 1000
# MLflow's default retries a dead server for about four minutes per call; a job must not
# stall that long on a copy of its own records (the operator's own settings win).
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
_UNSAFE_KEY = re.compile(r"[^\w.\- /:]")


def tracking_uri(
    tracking: TrackingSpec, environ: Mapping[str, str | None] | None = None
) -> str | None:
    """Where a job is tracked: the spec's own URI, else NUMTUNE_MLFLOW_URI in `environ` (the
    process's environment unless given: the service hands its setting in), else nowhere."""
    configured = (os.environ if environ is None else environ).get(TRACKING_ENV)
    return tracking.mlflow_uri or configured or None


def with_tracking_uri(spec: JobSpec, environ: Mapping[str, str | None] | None = None) -> JobSpec:
    """The spec with the configured URI written in when it names none (`tracking_uri`), so
    that the request and the `spec.json` the job leaves say where it was tracked."""
    uri = tracking_uri(spec.tracking, environ)
    if uri is None or spec.tracking.mlflow_uri == uri:
        return spec
    return spec.model_copy(
        update={"tracking": spec.tracking.model_copy(update={"mlflow_uri": uri})}
    )


def mlflow_client(uri: str) -> Any:
    """An MlflowClient for tracking and the model registry at `uri` (the one place numtune
    imports mlflow; called only when a URI is configured)."""
    for key, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def tracking_errors() -> tuple[type[Exception], ...]:
    """What talking to MLflow raises: its own exception (servers, SQL stores), OSError (a
    local store that cannot be created), ImportError (the `mlflow` extra not installed)."""
    try:
        from mlflow.exceptions import MlflowException
    except ImportError:
        return (ImportError, OSError)
    return (MlflowException, ImportError, OSError)


def _key(name: str) -> str:
    return _UNSAFE_KEY.sub("_", name)[:250]


def flat_params(data: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested spec fields as MLflow params: `loss.name` -> "smmd"; lists and other values
    as JSON; None (a field left unset) is left out."""
    out: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat_params(value, f"{name}."))
        elif value is not None:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            out[_key(name)] = text[:PARAM_MAX_CHARS]
    return out


def numbers(row: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """A row's numeric metrics (not its step, not text such as a checkpoint's URI)."""
    return {
        _key(f"{prefix}{k}"): float(v)
        for k, v in row.items()
        if k != "step" and isinstance(v, int | float) and not isinstance(v, bool)
    }


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    return (items[i : i + size] for i in range(0, len(items), size))


class RunLog:
    """One MLflow run, addressed by its id through an MlflowClient: the driver and rank 0's
    writer thread (another process) log to the same run without mlflow's global active run.

    The client is made at the first call (on rank 0, in the writer's thread: importing mlflow
    costs the training thread nothing). Every call is safe: the first failure is logged as a
    warning and turns this RunLog off."""

    def __init__(self, uri: str, run_id: str, client: Any = None):
        self.uri, self.run_id = uri, run_id
        self._client = client
        self.on = True

    @classmethod
    def open(
        cls,
        uri: str,
        *,
        experiment: str,
        job_id: str,
        tags: Mapping[str, str],
        params: Mapping[str, str],
        parent_run_id: str | None = None,
    ) -> RunLog | None:
        """The run tagged with `job_id` in `experiment` (a rerun of the job resumes its run),
        else a new one; None, after a warning, when MLflow cannot be reached."""
        try:
            client = mlflow_client(uri)
            found = client.get_experiment_by_name(experiment)
            experiment_id = found.experiment_id if found else client.create_experiment(experiment)
            runs = client.search_runs(
                [experiment_id], filter_string=f"tags.`{JOB_TAG}` = '{job_id}'", max_results=1
            )
            if runs:
                run_id = runs[0].info.run_id
                client.update_run(run_id, status="RUNNING")
            else:
                all_tags = {JOB_TAG: job_id, **tags}
                if parent_run_id:  # MLflow's own tag for a nested run
                    all_tags["mlflow.parentRunId"] = parent_run_id
                run = client.create_run(experiment_id, tags=all_tags, run_name=job_id)
                run_id = run.info.run_id
        except tracking_errors() as error:
            log.warning("MLflow tracking off for %s (%s): %r", job_id, uri, error)
            return None
        opened = cls(uri, run_id, client)
        opened._call("log params", lambda c: opened._log_params(c, params))
        log.info("tracking %s in MLflow at %s (%s, run %s)", job_id, uri, experiment, run_id)
        return opened

    def _call(self, what: str, fn: Callable[[Any], object]) -> None:
        """`fn(client)`, unless off; its failure (or the client's) turns tracking off."""
        if not self.on:
            return
        try:
            if self._client is None:
                self._client = mlflow_client(self.uri)
            fn(self._client)
        except tracking_errors() as error:
            self.on = False
            log.warning("MLflow tracking off for run %s (%s failed): %s", self.run_id, what, error)

    def _log_params(self, client: Any, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        existing = client.get_run(self.run_id).data.params
        # A resumed run keeps its params: MLflow refuses to change a logged value.
        fresh = [Param(k, v) for k, v in params.items() if k not in existing]
        for chunk in _chunks(fresh, BATCH_PARAMS):
            client.log_batch(self.run_id, params=list(chunk))

    def _log_metrics(self, client: Any, rows: list[tuple[int, dict[str, float]]]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, step) for step, values in rows for k, v in values.items()]
        for chunk in _chunks(metrics, BATCH_METRICS):
            client.log_batch(self.run_id, metrics=list(chunk))

    def log_rows(self, rows: Sequence[MetricsRow]) -> None:
        """Each metrics row's numbers at its step (StepLog's sink: one batch per write)."""
        steps = [(r.step, numbers(r.as_dict())) for r in rows]
        self._call("log metrics", lambda c: self._log_metrics(c, steps))

    def log_best(self, metrics: Mapping[str, Any], checkpoint: str | None) -> None:
        """The best checkpoint's metrics, as `best_<name>` at its step, and where it is."""
        best = [(int(metrics.get("step") or 0), numbers(metrics, BEST_PREFIX))]
        self._call("log best", lambda c: self._log_metrics(c, best))
        if checkpoint:
            self.tag("numtune.best_checkpoint", checkpoint)

    def tag(self, key: str, value: str) -> None:
        self._call("tag", lambda c: c.set_tag(self.run_id, key, value))

    def close(self, succeeded: bool) -> None:
        status = "FINISHED" if succeeded else "FAILED"
        self._call("end run", lambda c: c.set_terminated(self.run_id, status))


def job_tags(spec: JobSpec, kind: str = "job") -> dict[str, str]:
    tags = {"numtune.kind": kind, "numtune.loss": spec.loss.name, "numtune.name": spec.name}
    if spec.tracking.owner:
        tags["numtune.owner"] = spec.tracking.owner
    return tags


def open_job_run(spec: JobSpec, job_id: str) -> RunLog | None:
    """The driver's run for a job: None (and mlflow never imported) without a URI."""
    uri = tracking_uri(spec.tracking)
    if uri is None:
        return None
    return RunLog.open(
        uri,
        experiment=spec.tracking.experiment,
        job_id=job_id,
        tags=job_tags(spec),
        params=flat_params(spec.model_dump(mode="json")),
    )
