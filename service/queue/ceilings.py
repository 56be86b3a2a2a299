"""The service's ceilings on what one spec may ask (admin settings), checked at submit: 422
problems naming the field, before anything is recorded.

The spec's own ranges (`jobs.spec`) say what a job can be; these say what this service
runs: workers per job, the memory they imply, the optimizer steps a spec implies whatever
field implies them (`train.steps`, or `train.epochs` over the training set; every trial of
a sweep), trials per sweep and the wall-clock limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jobs.spec import JobSpec, StudySpec, TunedArm, TuneSpec

Problem = dict[str, str]


@dataclass(frozen=True)
class Ceilings:
    max_steps: int  # optimizer steps one job (or one trial) may imply
    max_sweep_steps: int  # steps all trials of a sweep imply together
    max_trials: int
    max_timeout_s: float | None
    max_workers_per_job: int
    worker_memory_mb: int  # what one worker process is taken to hold (model, optimizer)
    max_job_memory_mb: int  # the most one job's (or one sweep's) workers may imply at once
    # One study as a whole (every sweep's trials, and every run's and trial's steps): each
    # sweep alone may be within max_trials and max_sweep_steps, yet 8 of them are not.
    max_study_trials: int = 256
    max_study_steps: int = 20_000_000


def implied_steps(spec: JobSpec) -> float:
    """Optimizer steps the job runs at most: `train.steps`, or `epochs` over its training
    set (`data.train_size` rows at most) in global batches (per-worker batch × workers ×
    accumulation), as `jobs.train.loop.total_steps` counts them. A float: 1e12 epochs must not
    overflow on the way to being refused."""
    train = spec.train
    if train.steps is not None:
        return float(train.steps)
    per_step = train.batch_size * train.grad_accum * spec.scaling.num_workers
    steps = (train.epochs or 0.0) * spec.data.train_size / per_step
    return float(math.ceil(steps)) if math.isfinite(steps) else steps


def _workers(spec: JobSpec | TuneSpec) -> int:
    """Worker processes alive at once: a sweep's concurrent trials each have their own. A
    sweep without max_concurrent_trials runs as many trials as the cluster fits, which
    admission caps; here it counts one trial's."""
    if isinstance(spec, TuneSpec):
        trials = min(spec.max_concurrent_trials or 1, spec.total_trials)
        return spec.base.scaling.num_workers * trials
    return spec.scaling.num_workers


def over_ceilings(spec: JobSpec | TuneSpec, limits: Ceilings) -> list[Problem]:
    """Fields beyond the service's ceilings, as 422 problems."""
    base, prefix = (spec.base, "base.") if isinstance(spec, TuneSpec) else (spec, "")
    problems: list[Problem] = []
    length = "train.steps" if base.train.steps is not None else "train.epochs"
    steps = implied_steps(base)
    if steps > limits.max_steps:
        message = f"implies {steps:.3g} optimizer steps; at most {limits.max_steps} on this service"
        problems.append({"field": f"{prefix}{length}", "message": message})
    if isinstance(spec, TuneSpec):
        problems += _sweep_problems(spec, steps, limits)
    workers = base.scaling.num_workers
    if workers > limits.max_workers_per_job:
        message = f"at most {limits.max_workers_per_job} workers per job on this service"
        problems.append({"field": f"{prefix}scaling.num_workers", "message": message})
    memory = _workers(spec) * limits.worker_memory_mb
    if memory > limits.max_job_memory_mb:
        message = (
            f"{_workers(spec)} worker processes at once imply about {memory} MB "
            f"({limits.worker_memory_mb} MB each); at most {limits.max_job_memory_mb} MB"
        )
        field = "max_concurrent_trials" if isinstance(spec, TuneSpec) else "scaling.num_workers"
        problems.append({"field": field, "message": message})
    timeout = limits.max_timeout_s
    if timeout is not None and spec.timeout_s is not None and spec.timeout_s > timeout:
        problems.append({"field": "timeout_s", "message": f"at most {timeout:g} s on this service"})
    return problems


def _sweep_problems(spec: TuneSpec, steps: float, limits: Ceilings) -> list[Problem]:
    problems: list[Problem] = []
    if spec.total_trials > limits.max_trials:
        message = f"{spec.total_trials} trials in all; at most {limits.max_trials} on this service"
        problems.append({"field": "num_samples", "message": message})
    total = steps * spec.total_trials
    if total > limits.max_sweep_steps:
        message = (
            f"{spec.total_trials} trials × {steps:.3g} steps imply {total:.3g} steps in all;"
            f" at most {limits.max_sweep_steps} per sweep on this service"
        )
        problems.append({"field": "num_samples", "message": message})
    return problems


def study_sweeps(spec: StudySpec) -> list[tuple[str, TuneSpec]]:
    """(the field that asks for it, the sweep) for every sweep a study runs: each tuned
    arm's, and ce's learning-rate sweep."""
    labelled = zip(spec.labels(), spec.arms, strict=True)
    sweeps = [
        (f"arms[{i}]", spec.sweep_spec(label, arm))
        for i, (label, arm) in enumerate(labelled)
        if isinstance(arm, TunedArm)
    ]
    if spec.tune_lr is not None:
        sweeps.append(("tune_lr", spec.lr_sweep_spec()))
    return sweeps


def over_study_totals(spec: StudySpec, limits: Ceilings) -> list[Problem]:
    """A study's totals beyond the service's ceilings: sweep trials over all its sweeps, and
    optimizer steps over all its evaluation runs and sweep trials (each run trains the base's
    steps: runs differ only in loss, seed and learning rate)."""
    sweeps = study_sweeps(spec)
    trials = sum(sweep.total_trials for _, sweep in sweeps)
    run_steps = implied_steps(spec.base)
    total = spec.total_runs * run_steps
    total += sum(sweep.total_trials * implied_steps(sweep.base) for _, sweep in sweeps)
    problems: list[Problem] = []
    if trials > limits.max_study_trials:
        message = (
            f"{trials} sweep trials in all ({len(sweeps)} sweeps' num_samples); at most "
            f"{limits.max_study_trials} per study on this service"
        )
        problems.append({"field": "arms", "message": message})
    if total > limits.max_study_steps:
        length = "train.steps" if spec.base.train.steps is not None else "train.epochs"
        message = (
            f"the study implies {total:.3g} optimizer steps in all ({spec.total_runs} runs × "
            f"{run_steps:.3g}, and {trials} sweep trials); at most {limits.max_study_steps} "
            "per study on this service"
        )
        problems.append({"field": f"base.{length}", "message": message})
    return problems
