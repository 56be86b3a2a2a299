"""Which decoding each arm of a study is judged by (`StudySpec.decoding`, `arm_decodings`),
and what that asks of its runs.

An arm is judged by one decoding (jobs/spec/decoding.py), the same for all its seeds; ce is
an arm here too. `best_on_validation` chooses it per arm after the runs end, on validation
rows carved from the training rows: every run of the study then holds out the rows the
study's sweeps validate on (the last `sweeps.validation_size`, default `eval_size`, of the
training rows: `data.validation_size`) and scores them under each candidate decoding (the
base's `train.eval_decoding` and `train.eval_decodings`). The held-out test questions take no
part in the choice. Every run of a study scores the same decodings, so that any arm's
choice can be compared with ce's on the same footing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobs.spec.decoding import BEST_ON_VALIDATION, SCORED_DECODINGS, StudyDecoding
from jobs.spec.study_sweeps import BASELINE

if TYPE_CHECKING:
    from jobs.spec.study import StudySpec


def declared(spec: StudySpec, label: str) -> StudyDecoding | None:
    """The decoding `label` (an arm's label, or ce) is judged by as declared; None: the
    base's train.eval_decoding, as every study before per-arm decodings."""
    return spec.arm_decodings.get(label, spec.decoding)


def judged_by(spec: StudySpec) -> dict[str, StudyDecoding | None]:
    """Every arm's declared decoding, ce first."""
    return {label: declared(spec, label) for label in [BASELINE, *spec.labels()]}


def candidates(spec: StudySpec) -> list[str]:
    """The decodings every run scores: the base's own, its eval_decodings, and each one an
    arm is judged by (best_on_validation chooses among these)."""
    train = spec.base.train
    fixed = [d for d in judged_by(spec).values() if d is not None and d != BEST_ON_VALIDATION]
    wanted = {train.eval_decoding, *train.eval_decodings, *fixed}
    return [d for d in SCORED_DECODINGS if d in wanted]


def on_validation(spec: StudySpec) -> bool:
    return BEST_ON_VALIDATION in judged_by(spec).values()


def validation_size(spec: StudySpec) -> int:
    """The rows held out: those the study's sweeps validate on."""
    return spec.sweeps.validation_size or spec.base.data.eval_size


def run_overrides(spec: StudySpec, data: dict[str, Any]) -> None:
    """Set, in a run's JobSpec dict, the decodings it scores and the validation rows it
    holds out; a study that declares no decoding leaves the spec as it was (same digest)."""
    train = spec.base.train
    wanted = tuple(d for d in candidates(spec) if d != train.eval_decoding)
    if set(wanted) != set(train.eval_decodings) - {train.eval_decoding}:
        data["train"] = {**data["train"], "eval_decodings": wanted}
    if on_validation(spec):
        data["data"] = {**data["data"], "validation_size": validation_size(spec)}


def check(spec: StudySpec) -> None:
    """ValueErrors naming the field: labels that name no arm, a base that holds rows out
    itself (the study decides that), rows the runs cannot spare."""
    known = [BASELINE, *spec.labels()]
    unknown = sorted(set(spec.arm_decodings) - set(known))
    if unknown:
        raise ValueError(f"arm_decodings: {unknown} name no arm; the arms are {known}")
    if spec.base.data.validation_size is not None:
        raise ValueError(
            "base.data.validation_size: a study holds validation rows out itself, for "
            "best_on_validation (the rows its sweeps validate on)"
        )
