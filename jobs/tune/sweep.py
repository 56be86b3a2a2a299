"""Ray Tune sweeps over LossSpec fields (and lr): `python -m jobs tune SPEC`.

Ray 2.60 runs Train under Tune this way: a Tune *function* trainable builds and fits the
trial's TorchTrainer; the Train reports that carry the eval metric are forwarded to Tune
(ASHA compares trials on them at `step`); each Train run is named after its trial id, so
a restarted trial resumes from its own checkpoints. Two layers of retries: Ray Train
restarts dead workers (base.max_failures), Tune restarts failed trials (max_failures).
A sweep asked to pause stops every trial at a step boundary and ends `paused`; run again,
it restores the experiment and each trial goes on from there (jobs/tune/pause.py).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import ray
from ray import PlacementGroupID, tune
from ray.tune.integration.ray_train import TuneReportCallback
from ray.tune.schedulers import ASHAScheduler
from ray.util.placement_group import PlacementGroup

from jobs.records.models import PAUSE_REQUEST, FailureCode, TrialRow, TuneResult
from jobs.records.run_files import RunFiles
from jobs.spec import TRIAL_DRIVER_CPU, SearchDim, TuneSpec
from jobs.tracking.job import RunLog, tracking_uri
from jobs.tracking.sweep import open_sweep
from jobs.train.checkpoint import drop_training_state
from jobs.train.runner import build_trainer
from jobs.tune.pause import PauseSweep, clear_marks, hold_paused, marks
from jobs.tune.report import best_row, trial_rows, write_plot

log = logging.getLogger(__name__)


class SweepDoesNotFitError(RuntimeError):
    """The cluster cannot run even one trial of the sweep at a time."""


class EvalReports(TuneReportCallback):
    """Forward to Tune only the reports that carry the metric (Tune rejects the others)."""

    def __init__(self, metric: str):
        super().__init__()
        self.metric = metric

    def after_report(
        self, run_context: Any, metrics: list[dict[str, Any]], checkpoint: Any
    ) -> None:
        # A pause's report is not one an uninterrupted trial makes: Tune (its history, its
        # best) sees none of it, only Train keeps its checkpoint to resume from.
        if self.metric in metrics[0] and not metrics[0].get("paused"):
            super().after_report(run_context, metrics, checkpoint)


def to_tune(dim: SearchDim) -> Any:
    if dim.kind in ("loguniform", "uniform"):
        low, high = dim.points()
        assert isinstance(low, float) and isinstance(high, float)  # SearchDim checked them
        sample = tune.loguniform if dim.kind == "loguniform" else tune.uniform
        return sample(low, high)
    if dim.kind == "choice":
        return tune.choice(list(dim.points()))
    return tune.grid_search(list(dim.points()))


def trials_that_fit(spec: TuneSpec, resources: dict[str, float]) -> int:
    cpus, gpus = spec.trial_reserved
    fits = math.floor(resources.get("CPU", 0.0) / cpus + 1e-9)
    if gpus:
        fits = min(fits, math.floor(resources.get("GPU", 0.0) / gpus + 1e-9))
    return fits


def concurrency(
    spec: TuneSpec, cluster: dict[str, float], free: dict[str, float] | None = None
) -> int:
    """How many trials can run at once; fails fast, saying what fits, when none can.

    With `free` (what is unreserved now), no more than fit in it: the service starts a
    sweep once one trial fits, and a trial started beyond the free CPUs would wait for
    its workers until Train's worker-group timeout fails it."""
    cpus, gpus = spec.trial_reserved
    have_cpu, have_gpu = cluster.get("CPU", 0.0), cluster.get("GPU", 0.0)
    fits = trials_that_fit(spec, cluster)
    if fits < 1:
        scaling = spec.base.scaling
        # Rounded down, so the figure it suggests does fit.
        most = max(0.0, math.floor((have_cpu - TRIAL_DRIVER_CPU) / scaling.num_workers * 100) / 100)
        raise SweepDoesNotFitError(
            f"one trial needs {cpus:g} CPUs and {gpus:g} GPUs ({scaling.num_workers} workers × "
            f"{scaling.cpus_per_worker:g} CPUs + {TRIAL_DRIVER_CPU} for its driver) but the "
            f"cluster has {have_cpu:g} CPUs and {have_gpu:g} GPUs. What fits: "
            f"base.scaling.cpus_per_worker <= {most:.2f} with {scaling.num_workers} workers, "
            "or fewer workers"
        )
    if free is not None:
        fits = max(1, min(fits, trials_that_fit(spec, free)))
    limit = spec.max_concurrent_trials or fits
    return min(limit, fits)


def _trial(config: dict[str, Any], spec_json: str, tune_id: str, storage: str | None) -> None:
    """One trial: the base job with this trial's values, fitted by Ray Train."""
    spec = TuneSpec.model_validate_json(spec_json)
    trial_id = tune.get_context().get_trial_id()
    files = RunFiles.for_job(tune_id, storage)
    trainer = build_trainer(
        spec.trial_spec(config),
        files,
        name=f"trial-{trial_id}",
        callbacks=[EvalReports(spec.metric_key)],
    )
    fit = trainer.fit()
    last = fit.metrics or {}
    if fit.error is None and last.get("paused") and fit.checkpoint:
        hold_paused(files, trial_id, int(last["step"]), files.to_uri(fit.checkpoint.path))


def sweep_tracking(spec: TuneSpec, tune_id: str) -> tuple[RunLog | None, list[Any]]:
    """The sweep's MLflow parent run and the trials' callback; none without a tracking URI
    (and then nothing of MLflow is imported)."""
    if tracking_uri(spec.base.tracking) is None:
        return None, []
    return open_sweep(spec, tune_id)


def build_tuner(
    spec: TuneSpec, tune_id: str, storage: str | None, callbacks: list[Any] | None = None
) -> tune.Tuner:
    files = RunFiles.for_job(tune_id, storage)
    trainable = tune.with_resources(
        tune.with_parameters(
            _trial, spec_json=spec.model_dump_json(), tune_id=tune_id, storage=storage
        ),
        {"CPU": TRIAL_DRIVER_CPU},
    )
    path = files.sub_uri("tune")
    if tune.Tuner.can_restore(path):
        log.info("resuming sweep %s from %s", tune_id, path)
        return tune.Tuner.restore(path, trainable=trainable, resume_errored=True)

    search_alg = None
    if spec.search == "optuna":
        from ray.tune.search.optuna import OptunaSearch

        search_alg = OptunaSearch(seed=spec.base.train.seed)
    scheduler = None
    if spec.asha is not None:
        scheduler = ASHAScheduler(
            time_attr="step",
            max_t=spec.base.train.steps or 10**9,
            grace_period=spec.asha.grace_period,
            reduction_factor=spec.asha.reduction_factor,
        )
    return tune.Tuner(
        trainable,
        param_space={k: to_tune(d) for k, d in spec.space.items()},
        tune_config=tune.TuneConfig(
            metric=spec.metric_key,
            mode=spec.metric_mode,
            num_samples=spec.num_samples,
            search_alg=search_alg,
            scheduler=scheduler,
            max_concurrent_trials=concurrency(
                spec, ray.cluster_resources(), ray.available_resources()
            ),
        ),
        run_config=tune.RunConfig(
            name="tune",
            storage_path=files.uri,
            failure_config=tune.FailureConfig(max_failures=spec.max_failures),
            # Pickled with the tuner: a restored sweep can be paused again.
            callbacks=[*(callbacks or []), PauseSweep(files.uri)],
        ),
    )


def release_placement_groups() -> None:
    """Remove the placement groups this driver's job still holds once fit() has returned.
    A trial that ASHA stopped can leave its Train workers' group reserved; a sweep's own
    Ray job frees it at exit, but a driver that lives on (a test, the bench, a notebook)
    kept those CPUs: the next work then waited for them for ever."""
    job = ray.get_runtime_context().get_job_id()  # a group's id ends with its job's id
    for group_id, group in ray.util.placement_group_table().items():
        if group["state"] != "REMOVED" and group_id.endswith(job):
            ray.util.remove_placement_group(PlacementGroup(PlacementGroupID.from_hex(group_id)))


def paused_rows(rows: list[TrialRow], files: RunFiles) -> list[TrialRow]:
    """The trials that stopped for the pause, marked so (with the step they stopped at)."""
    paused = marks(files)
    return [
        row.model_copy(update={"status": "paused", "last_step": paused[row.trial_id]["step"]})
        if row.trial_id in paused and row.status != "completed"
        else row
        for row in rows
    ]


def outcome(spec: TuneSpec, files: RunFiles, stopped: int, rows: list[TrialRow]) -> TuneResult:
    """How the sweep ended: paused, interrupted, no trial finished, or its best trial.
    `stopped`: the trials Tune counts terminated or errored once fit() returned, which
    includes those it stopped at its graceful stop (running, unfinished: they resume)."""
    finished = [r for r in rows if r.best_metric is not None and r.best_checkpoint]
    best = best_row(finished, lambda r: r.best_metric, spec.metric_mode)
    paused = sum(r.status == "paused" for r in rows)
    ended = stopped - paused
    if (paused or ended < spec.total_trials) and files.has(PAUSE_REQUEST):
        # Stopped for a pause (jobs/tune/pause.py): what it resumes from is the experiment
        # state; the same sweep run again restores it.
        return TuneResult(
            status="paused",
            best_checkpoint=files.sub_uri("tune"),
            detail=f"{ended} of {spec.total_trials} trials ended, {paused} paused at a step "
            "boundary; resuming restores the experiment",
            metrics={"trials_ended": ended, "trials_paused": paused},
        )
    # An interrupted fit() (SIGINT, SIGUSR1) returns normally with trials still pending or
    # running; such a sweep is not a result, and the same tune id resumes it.
    if ended < spec.total_trials:
        return TuneResult.failed(
            FailureCode.INTERRUPTED,
            f"{ended} of {spec.total_trials} trials ended; run the same sweep again to resume",
        )
    if best is None or best.best_checkpoint is None:
        return TuneResult.failed(
            FailureCode.NO_TRIAL_FINISHED, "no trial reported the metric with a checkpoint"
        )
    return TuneResult(
        status="succeeded",
        best_trial=best.trial_id,
        best_config=best.config,
        best_checkpoint=files.to_uri(best.best_checkpoint),
        metrics={spec.metric_key: best.best_metric},
    )


def run_tune(spec: TuneSpec, tune_id: str, storage: str | None = None) -> TuneResult:
    """Run (or resume) the sweep; write trials.json, trials.png and result.json. A sweep
    that cannot fit even one trial gets a `does_not_fit` result (SweepDoesNotFitError
    still raised, so the caller can say so and exit as for an invalid spec)."""
    if not ray.is_initialized():
        ray.init()
    files = RunFiles.for_job(tune_id, storage)
    clear_marks(files)  # an earlier pause's: this run goes on from it
    try:
        concurrency(spec, ray.cluster_resources())  # fail fast, before any trial starts
        # The sweep's MLflow parent run, its trials children (none without a tracking URI).
        parent, callbacks = sweep_tracking(spec, tune_id)
        tuner = build_tuner(spec, tune_id, storage, callbacks)
    except SweepDoesNotFitError as error:
        # The control plane reads the reason from result.json like any other end.
        files.write_result(TuneResult.failed(FailureCode.DOES_NOT_FIT, str(error)))
        raise
    grid = tuner.fit()
    release_placement_groups()
    rows = paused_rows(trial_rows(grid, spec), files)
    files.write_trials(rows)
    write_plot(rows, spec, files)
    result = outcome(spec, files, grid.num_terminated + grid.num_errors, rows)
    result.trials = len(rows)
    files.write_result(result)
    if result.status == "succeeded":
        drop_training_state(files)  # every trial's: a finished sweep never resumes
    if parent is not None:
        if result.best_trial is not None:
            parent.log_best(result.metrics, result.best_checkpoint)
            parent.tag("numtune.best_trial", result.best_trial)
        parent.close(result.status == "succeeded")
    log.info("sweep %s: %s", tune_id, result.model_dump_json())
    return result
