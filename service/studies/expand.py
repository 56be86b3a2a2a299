"""A study's jobs: what a StudySpec expands into, run by run (ordinary jobs and sweeps,
through the same admission queue as any other)."""

from __future__ import annotations

from typing import Any

from jobs.spec import BASELINE, JobSpec, LossSpec, StudySpec, TunedArm, TuneSpec

# (the study's entry for the job, kind, job name, spec): what the store inserts.
NewJob = tuple[dict[str, Any], str, str, JobSpec | TuneSpec]


def run_job(spec: StudySpec, label: str, loss: LossSpec, seed: int, lr: float | None) -> NewJob:
    job = spec.run_spec(label, loss, seed, lr)
    return {"arm": label, "seed": seed}, "job", job.name, job


def is_lr_sweep(run: dict[str, Any]) -> bool:
    """The study's entry for ce's learning-rate sweep (`tune_lr`): ce's only sweep."""
    return bool(run["kind"] == "tune" and run["arm"] == BASELINE)


def first_jobs(spec: StudySpec) -> list[NewJob]:
    """With `tune_lr`, ce's learning-rate sweep alone: everything else trains at the rate
    it chooses, so the study loop adds it then (`arm_jobs`). With `tune_lr.per_arm`, every
    arm's own sweep (`own_sweeps`). Without `tune_lr`, `arm_jobs` now."""
    if spec.tune_lr is None:
        return arm_jobs(spec, None)
    if spec.per_arm_lr:
        return own_sweeps(spec)
    sweep = spec.lr_sweep_spec()
    return [({"arm": BASELINE, "seed": None}, "tune", sweep.name, sweep)]


def own_sweeps(spec: StudySpec) -> list[NewJob]:
    """`tune_lr.per_arm`: one sweep per arm, ce's first, all with one budget; each arm's
    runs wait for its own sweep alone (the study loop adds them, `swept_runs`)."""
    sweeps = [(BASELINE, spec.lr_sweep_spec())]
    for label, arm in zip(spec.labels(), spec.arms, strict=True):
        if isinstance(arm, TunedArm):
            sweeps.append((label, spec.sweep_spec(label, arm)))
        else:
            sweeps.append((label, spec.lr_sweep_spec(label, arm)))
    return [({"arm": label, "seed": None}, "tune", s.name, s) for label, s in sweeps]


def arm_jobs(spec: StudySpec, lr: float | None) -> list[NewJob]:
    """The sweeps of the tuned arms (they gate those arms' runs, so they queue first), then
    ce and every fixed arm on each seed, seed by seed (paired runs finish close together);
    all at `lr`, ce's swept learning rate, where the study has one."""
    jobs: list[NewJob] = []
    fixed: list[tuple[str, LossSpec]] = [(BASELINE, LossSpec(name="ce"))]
    for label, arm in zip(spec.labels(), spec.arms, strict=True):
        if isinstance(arm, TunedArm):
            sweep = spec.sweep_spec(label, arm, lr)
            jobs.append(({"arm": label, "seed": None}, "tune", sweep.name, sweep))
        else:
            fixed.append((label, arm))
    for seed in spec.seeds:
        jobs += [run_job(spec, label, loss, seed, lr) for label, loss in fixed]
    return jobs
