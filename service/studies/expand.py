"""A study's jobs: what a StudySpec expands into, run by run (ordinary jobs and sweeps,
through the same admission queue as any other)."""

from __future__ import annotations

from typing import Any

from jobs.spec import BASELINE, JobSpec, LossSpec, StudySpec, TunedArm, TuneSpec

# (the study's entry for the job, kind, job name, spec): what the store inserts.
NewJob = tuple[dict[str, Any], str, str, JobSpec | TuneSpec]


def run_job(spec: StudySpec, label: str, loss: LossSpec, seed: int) -> NewJob:
    job = spec.run_spec(label, loss, seed)
    return {"arm": label, "seed": seed}, "job", job.name, job


def first_jobs(spec: StudySpec) -> list[NewJob]:
    """The sweeps of the tuned arms (they gate those arms' runs, so they queue first), then
    ce and every fixed arm on each seed, seed by seed (paired runs finish close together)."""
    jobs: list[NewJob] = []
    fixed: list[tuple[str, LossSpec]] = [(BASELINE, LossSpec(name="ce"))]
    for label, arm in zip(spec.labels(), spec.arms, strict=True):
        if isinstance(arm, TunedArm):
            sweep = spec.sweep_spec(label, arm)
            jobs.append(({"arm": label, "seed": None}, "tune", sweep.name, sweep))
        else:
            fixed.append((label, arm))
    for seed in spec.seeds:
        jobs += [run_job(spec, label, loss, seed) for label, loss in fixed]
    return jobs
