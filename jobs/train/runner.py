"""Run one JobSpec as a Ray Train job and leave its record in storage.

The driver side of `python -m jobs run`: builds the TorchTrainer from the spec (whose rank 0
appends every metrics row to `metrics.jsonl`, jobs/train/steplog.py), and writes `result.json`
(a `RunResult`: status, failure code (jobs/train/failures.py), best checkpoint, final
metrics, provenance) however the run ends.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig, UserCallback
from ray.train.torch import TorchTrainer

from jobs.calibration.held_out import calibrate_checkpoint
from jobs.records.models import PREDICTIONS, SPEC, Provenance, RunResult
from jobs.records.provenance import provenance
from jobs.records.restore import RUN_NAME
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec
from jobs.tracking.job import RunLog, open_job_run, with_tracking_uri
from jobs.train.checkpoint import drop_training_state
from jobs.train.failures import described, failure_code
from jobs.train.loop import train_loop_per_worker
from jobs.train.loop_config import LoopConfig, TrackingRef
from jobs.train.rendezvous import LocalTorchConfig

log = logging.getLogger(__name__)


def build_trainer(
    spec: JobSpec,
    files: RunFiles,
    *,
    name: str = RUN_NAME,
    callbacks: list[UserCallback] | None = None,
    in_process: bool = False,
    tracking: RunLog | None = None,
) -> TorchTrainer:
    """The TorchTrainer for a spec, its run `name` under the run folder (deterministic, so
        a rerun of the same job or trial resumes). Without `callbacks` (Tune's) the workers write
    metrics.jsonl (and send its rows to the `tracking` run);
        `in_process` runs the loop in this process (Ray Train's local mode; for fast tests)."""
    scaling = spec.scaling
    resources: dict[str, float] = {"CPU": scaling.cpus_per_worker}
    if scaling.use_gpu:
        resources["GPU"] = scaling.worker_gpus
    return TorchTrainer(
        train_loop_per_worker,
        train_loop_config=LoopConfig(
            spec=spec,
            run_name=name,
            pause_uri=files.uri,
            # With Tune's callbacks the reports are the record, not metrics.jsonl.
            run_uri=files.uri if callbacks is None else None,
            tracking=TrackingRef(tracking.uri, tracking.run_id) if tracking else None,
        ).for_ray(),
        # The process group's rendezvous stays off the network when workers share a node.
        torch_config=LocalTorchConfig(),
        scaling_config=ScalingConfig(
            num_workers=0 if in_process else scaling.num_workers,
            use_gpu=scaling.use_gpu,
            resources_per_worker=resources,
        ),
        run_config=RunConfig(
            name=name,
            storage_path=files.uri,
            # A bounded controller retry: when the cluster shrinks below what the job
            # needs, Ray's default (-1) retries worker-group startup forever and the job
            # would stay running; this fails it instead.
            failure_config=FailureConfig(  # type: ignore[call-arg]  # V2 class; stubs are V1
                max_failures=spec.max_failures, controller_failure_limit=3
            ),
            checkpoint_config=CheckpointConfig(
                num_to_keep=spec.train.keep_top_k,
                checkpoint_score_attribute=f"eval_{spec.train.metric}",
                checkpoint_score_order=spec.train.metric_mode,
            ),
            callbacks=cast(list[Any], callbacks or []),
        ),
    )


def run_job(spec: JobSpec, job_id: str, storage: str | None = None) -> RunResult:
    """Fit the job; return (and store) its result record. Never raises for a failed run."""
    files = RunFiles.for_job(job_id, storage)
    spec = with_tracking_uri(spec)  # spec.json says where the job was tracked
    files.write_text(SPEC, spec.model_dump_json(indent=2))
    tracking = open_job_run(spec, job_id)  # None without a tracking URI
    origin = provenance(spec)
    try:
        fit = build_trainer(spec, files, tracking=tracking).fit()
        if fit.error is None and (fit.metrics or {}).get("paused") and fit.checkpoint:
            # Stopped at a step boundary on request (jobs/train/pause.py): that checkpoint
            # is where the same job, run again, goes on from.
            result = RunResult(
                status="paused",
                best_checkpoint=files.to_uri(fit.checkpoint.path),
                metrics=dict(fit.metrics or {}),
            )
            files.write_result(result)
            return result
        best = fit.get_best_checkpoint(f"eval_{spec.train.metric}", spec.train.metric_mode)
        best = best or fit.checkpoint
        if tracking is not None and best is not None:
            tracking.log_best(checkpoint_metrics(fit, best), files.to_uri(best.path))
        if best is not None:
            calibrate_checkpoint(spec, best.filesystem, best.path)  # calibration.json, or a warning
        result = RunResult(
            status="succeeded",
            best_checkpoint=files.to_uri(best.path) if best else None,
            metrics=dict(fit.metrics or {}),
        )
    except Exception as error:
        log.exception("job %s failed", job_id)
        result = RunResult.failed(failure_code(error), described(error))
    # The final evaluation's answers, when it ran (rank 0 wrote them, jobs/train/loop.py).
    written = PREDICTIONS if files.has(PREDICTIONS) else None
    result.provenance = finished(origin, result, written)
    result.decodings = files.read_decodings()  # each decoding's scores, when it ran
    files.write_result(result)
    if result.status == "succeeded":
        drop_training_state(files)  # nothing resumes a finished job (jobs/train/checkpoint.py)
    if tracking is not None:
        tracking.close(result.status == "succeeded")
    return result


def finished(origin: Provenance, result: RunResult, predictions: str | None) -> Provenance:
    """The run's provenance completed by what only its end knows: the predictions file it
    wrote and the precision its workers reported (train.precision `auto` resolved)."""
    precision = result.metrics.get("precision")
    return origin.model_copy(
        update={
            "predictions": predictions,
            "precision": precision if isinstance(precision, str) else None,
        }
    )


def checkpoint_metrics(fit: Any, best: Any) -> dict[str, Any]:
    """The metrics reported with the `best` checkpoint (the final ones if Ray has none)."""
    for checkpoint, metrics in fit.best_checkpoints or []:
        if checkpoint.path == best.path:
            return dict(metrics)
    return dict(fit.metrics or {})
