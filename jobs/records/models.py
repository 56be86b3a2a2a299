"""The files that pass between `service/` and `jobs/`: one typed record each, here.

All live in a run's folder, `<storage>/runs/<job id>/` (`jobs/records/run_files.py:RunFiles`),
and are written and read through `RunFiles` with these types:

    request.json   JobSpec or TuneSpec    service/backends/ray_backend.py
                                          -> `python -m jobs run|tune`
    spec.json      JobSpec                jobs/train/runner.py (and each checkpoint,
                                          jobs/train/checkpoint.py) -> service/registry/,
                                          jobs/infer/
    metrics.jsonl  MetricsRow per line    jobs/train/steplog.py (rank 0 of the run)
                                          -> service/jobs/copying.py
    trials.json    list of TrialRow       jobs/tune/sweep.py -> service/jobs/copying.py
    result.json    RunResult, TuneResult  jobs/train/runner.py, jobs/tune/sweep.py
                                          -> service/jobs/reconciler.py
    predictions.jsonl  QuestionRecord per line  jobs/train/loop.py (rank 0, the final evaluation)
                                          -> jobs.stats (paired bootstrap over questions)
    decodings.json DecodingsRecord        jobs/train/decodings.py (rank 0, the final evaluation
                                          under each of train.eval_decodings, with their
                                          predictions-[validation-]<decoding>.jsonl files)
                                          -> result.json, service/studies/ (each arm's decoding)
    base.json      BaseReference          an adapter's checkpoint (jobs/modeling/adapters.py)
                                          -> service/registry/ (lineage), loading (verified)

The specs are `jobs.spec`'s models; the rest are below. `result.json` is written once,
however the run ends; a run that ends without one failed before the job could say why.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from jobs.spec import JobSpec, PinnedArtifact, Strict

# predictions.jsonl's record, defined beside the statistics that read it.
from jobs.stats import QuestionRecord as QuestionRecord

REQUEST = "request.json"
SPEC = "spec.json"
METRICS = "metrics.jsonl"
TRIALS = "trials.json"
RESULT = "result.json"
BASE = "base.json"
PREDICTIONS = "predictions.jsonl"
DECODINGS = "decodings.json"
# Written by the control plane to ask a running job to pause at its next step boundary
# (jobs/train/pause.py reads it; only its presence counts).
PAUSE_REQUEST = "pause.request"


class FailureCode(StrEnum):
    """Why a run failed, chosen where it failed: by the exception's class
    (jobs/train/failures.py), by the sweep's driver (jobs/tune/sweep.py) or by the job's
    command line (jobs/__main__.py); written to result.json as its value."""

    OOM = "oom"
    INVALID_SPEC = "invalid_spec"
    INVALID_DATA = "invalid_data"
    MODEL_UNAVAILABLE = "model_unavailable"
    INSUFFICIENT_RESOURCES = "insufficient_resources"
    WORKER_FAILED = "worker_failed"
    DIVERGED = "diverged"  # the training loss became inf or NaN (the detail names the step)
    DOES_NOT_FIT = "does_not_fit"  # a sweep: not even one trial fits the cluster
    INTERRUPTED = "interrupted"  # a sweep stopped with trials pending; the same id resumes it
    NO_TRIAL_FINISHED = "no_trial_finished"  # a sweep whose trials all ended without the metric


# The control plane's names for the reasons a job gives (service/jobs/states.py:JobReason adds
# the service's own); service/jobs/reconciler.py maps each FailureCode to one of them.
Reason = Literal[
    "oom",
    "invalid_spec",
    "invalid_data",
    "model_unavailable",
    "insufficient_resources",
    "worker_failed",
    "diverged",
    "does_not_fit",
    "interrupted",
    "no_trial_finished",
]


class Decoding(BaseModel):
    """How the run's evaluation generated its answers (jobs/infer/evaluate.py)."""

    strategy: Literal["greedy"] = "greedy"
    number_first: bool  # number tokens competed as one choice (train.eval_decoding)
    max_new_tokens: int
    use_chat_template: bool | None  # None: used when the tokenizer has one


class Provenance(BaseModel):
    """What produced a run, so that it can be re-run and audited (jobs/records/provenance.py).
    A figure that could not be found reads "unknown"; finding them never fails a run."""

    numtune_version: str
    git_commit: str  # the commit of the numtune source that ran, "+dirty" if edited
    spec: JobSpec  # the exact spec the run read
    data_sha256: dict[str, str]  # every data file named by the spec -> sha256 (or why not)
    decoding: Decoding
    predictions: str | None = None  # PREDICTIONS when the final evaluation wrote it
    # The precision the workers trained in (train.precision, `auto` resolved on their device,
    # as their last report said); None when the run ended before one reported.
    precision: str | None = None


class DecodingScores(BaseModel):
    """One decoding's scores in a run's final evaluation (jobs/spec/decoding.py names them)."""

    metrics: dict[str, float]  # the held-out questions' metrics, named as eval_<metric> is
    predictions: str  # its answers in the run's folder: one QuestionRecord per line
    # The same on the training rows held out as validation (data.validation_size); None
    # when the run held none out.
    validation: dict[str, float] | None = None
    validation_predictions: str | None = None


class DecodingsRecord(BaseModel):
    """`decodings.json`: the final evaluation under every decoding the run scored. The
    primary one's test answers are predictions.jsonl and its metrics the eval_ ones."""

    primary: str  # train.eval_decoding
    samples: int  # K of sample_mean and sample_median
    validation_rows: int  # 0: the run trained on every training row
    scores: dict[str, DecodingScores]  # by decoding
    # Wall time of each pass over test and validation rows: greedy (every greedy-type
    # decoding but the primary's test pass, batched), sampled (K per question).
    seconds: dict[str, float]


class RunResult(BaseModel):
    """`result.json`: how the run ended, its best checkpoint, final metrics (the last
    evaluation's, whose answers are in predictions.jsonl) and its provenance."""

    # paused: the run stopped at a step boundary because the control plane asked it to
    # (jobs/train/pause.py); best_checkpoint is then the checkpoint it resumes from.
    status: Literal["succeeded", "failed", "paused"]
    reason: FailureCode | None = None
    detail: str | None = None
    best_checkpoint: str | None = None
    metrics: dict[str, Any] = {}
    provenance: Provenance | None = None  # absent in sweeps and in runs from before it
    # The final evaluation under each decoding it scored (decodings.json); None in sweeps,
    # failed runs and runs from before it.
    decodings: DecodingsRecord | None = None

    @classmethod
    def failed(cls, reason: FailureCode, detail: str) -> Self:
        return cls(status="failed", reason=reason, detail=detail)


class TuneResult(RunResult):
    """A sweep's `result.json`: the run's fields plus the winning trial and the count."""

    best_trial: str | None = None
    best_config: dict[str, Any] | None = None
    trials: int = 0


class MetricsRow(BaseModel):
    """One line of `metrics.jsonl`: what rank 0 reported at a step (loss parts, lr, eval
    metrics; each run reports its own set, so the other keys are kept as they come)."""

    model_config = ConfigDict(extra="allow")

    step: int
    checkpoint: str | None = None  # where the report saved one, as a URI

    def as_dict(self) -> dict[str, Any]:
        """The row as written: the keys it came with, no defaults added."""
        return self.model_dump(exclude_unset=True)


class TrialRow(BaseModel):
    """One trial in `trials.json`."""

    trial_id: str | None
    config: dict[str, Any]  # its values of the sweep's dimensions
    best_metric: float | None
    best_checkpoint: str | None  # the checkpoint of its best report that has one
    last_step: int
    # paused: stopped at a step boundary by the sweep's pause (last_step is that step)
    status: Literal["completed", "stopped_early", "error", "paused"]
    error: str | None = None


# BaseReference.sha256's key for bases that are not our files (random: presets, Hub ids):
# the sha256 of the loaded tensors (names, dtypes, shapes and bytes, in name order).
TENSORS_KEY = "<tensors>"


class BaseReference(Strict):
    """`base.json` of an adapter: what it was trained on and the sha256 of those weights as
    loaded. Loading the adapter rebuilds the base from this and refuses it when it is gone or
    a checksum differs."""

    source: str = Field(..., min_length=1, max_length=2000)  # bundled:, random:, registry:, dir
    seed: int = Field(0, ge=0)  # random: presets are built from it
    pinned: PinnedArtifact | None = None  # registry: bases, as the control plane pinned them
    sha256: dict[str, str] = Field(..., min_length=1)  # {weights file: sha256} or TENSORS_KEY
