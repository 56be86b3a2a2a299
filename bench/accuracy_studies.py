"""The pretrained cells as study specs: `bench/studies/<part>.yaml`, one definition for the
bench and the service.

Each file is a `StudySpec` that `numtune study run bench/studies/<part>.yaml` runs through
the service (POST /v1/studies). `accuracy.py --scale pretrained` builds its evaluation runs
from the same spec (`StudySpec.run_spec`, `StudySpec.tuned_loss`) and its sweeps' spaces
and budget from its `tune_lr` and tuned arm; it only names each run its own way
(`acc-<model>-<task>-<loss>-s<seed>`, nothing to register as) and points a JSONL cell at
the questions it generates, so that the runs kept in bench/results/pretrained-runs/ (file
name: the run's digest) are found again, and the service's study of the same file runs
exactly those runs.

The protocol's sweep settings are the files' `sweeps`: seed 1000, the last 300 training rows
to score trials on, Optuna search, ASHA (grace a quarter of the steps, factor 2); the
bench's sweeps use the same values (tests/unit/test_bench_pretrained_studies.py). What a
StudySpec cannot say stays the bench's, and only touches its sweeps (never an evaluation
run): the validation rows as JSONL files of their own, and the trials' cadence and CPU
share (an evaluation every 37 steps, 0.99 CPU; a study's sweeps, the base's 30 and 1).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from jobs.spec import BASELINE, JobSpec, LossSpec, StudySpec, TunedArm, load_spec_file

STUDIES = Path(__file__).resolve().parent / "studies"
Arm = LossSpec | TunedArm


@cache
def load_study(part: str) -> StudySpec:
    """The StudySpec of a pretrained part (`smollm2-units` → bench/studies/smollm2-units.yaml)."""
    return StudySpec.model_validate(load_spec_file(STUDIES / f"{part}.yaml"))


def bench_label(arm: Arm) -> str:
    """The bench's name for a study arm: `emd`, `del[weight=1]` (one knob off its default),
    `smmd_tuned` (a tuned arm)."""
    if isinstance(arm, TunedArm):
        return f"{arm.tuned}_tuned"
    default = LossSpec(name=arm.name).model_dump()
    changed = {k: v for k, v in arm.model_dump().items() if v != default[k]}
    if not changed:
        return arm.name
    if len(changed) > 1 or not isinstance(next(iter(changed.values())), float):
        raise ValueError(f"the bench labels one numeric knob off its default, not {changed}")
    ((key, value),) = changed.items()
    return f"{arm.name}[{key}={value:g}]"


def arms(study: StudySpec) -> dict[str, tuple[str, Arm]]:
    """The study's arms by their bench label: (the study's label, the arm); ce first."""
    found: dict[str, tuple[str, Arm]] = {BASELINE: (BASELINE, LossSpec(name=BASELINE))}
    for label, arm in zip(study.labels(), study.arms, strict=True):
        found[bench_label(arm)] = (label, arm)
    return found


def study_loss(study: StudySpec, loss_label: str, tuned: dict[str, object] | None) -> LossSpec:
    """The loss the study gives a bench label; a tuned arm's from its sweep's best config."""
    try:
        _, arm = arms(study)[loss_label]
    except KeyError:
        raise ValueError(
            f"{loss_label} is not an arm of {study.name} (bench/studies/{study.name}.yaml): "
            f"{', '.join(arms(study))}"
        ) from None
    if isinstance(arm, TunedArm):
        if tuned is None:
            raise ValueError(f"{loss_label}: its sweep has not run")
        return study.tuned_loss(arm, tuned)
    return arm


def study_job(
    study: StudySpec, loss: LossSpec, seed: int, lr: float | None, name: str, path: str | None
) -> JobSpec:
    """One of the study's evaluation runs (`run_spec`), named the bench's way (no registry
    name), its JSONL `path` (when given) the questions the bench wrote."""
    data = study.run_spec(loss.name, loss, seed, lr).model_dump()  # the label only names it
    data.update(name=name, register_as=None)
    if path is not None:
        data["data"] = {**data["data"], "path": path}
    return JobSpec.model_validate(data)
