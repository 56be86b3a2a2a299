"""The accuracy study's arms and cells, as the kept records and their readers name them.

The pretrained cells are study specs, `bench/studies/<part>.yaml`: one definition for the
bench and the service, which runs them (`numtune study run`, or `bench/study_records.py
--spec`, which keeps the runs as the bench's records). A loss label is a loss name with an
optional LossSpec override: `emd`, `emd[weight=1]`, `ntl_mse[distance=absolute]`;
`smmd_tuned` is Smooth-MMD with the bandwidth and weight its sweep found. The report, the
plots and the README renderers read the labels of the kept results through this module.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from jobs.spec import BASELINE, LossSpec, StudySpec, TunedArm, load_spec_file

STUDIES = Path(__file__).resolve().parent / "studies"
Arm = LossSpec | TunedArm

LOSSES = ("ce", "emd", "ntil", "mmd", "smmd", "ntl_mse", "del", "dist2", "ntl_number", "smmd_tuned")
NUMERIC = ("emd", "ntil", "mmd", "smmd", "ntl_mse", "del", "dist2", "ntl_number")
DEFAULT_WEIGHT = float(LossSpec().model_dump()["weight"])
# bench/protocol.md's cells (units, jsonl), then its eligibility fallbacks in order.
PRETRAINED_PARTS = ("smollm2-units", "smollm2-jsonl", "smollm2-listsum", "smollm2-add")
_LABEL = re.compile(r"^([a-z][a-z0-9_]*)(?:\[(\w+)=([\w.]+)\])?$")


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


# bench/protocol.md's arms, as the study specs name them: ce, emd, smmd_tuned, del[weight=1]
# (DEL at its authors' objective, ce + 1 · del).
PRETRAINED_ARMS = tuple(arms(load_study(PRETRAINED_PARTS[0])))


def parse_label(label: str) -> tuple[str, dict[str, Any]]:
    """`emd[weight=1]` → ("emd", {"weight": 1.0}); the override is a LossSpec field."""
    match = _LABEL.match(label)
    if match is None:
        raise ValueError(f"bad loss label {label!r}")
    name, key, value = match.groups()
    if key is None:
        return name, {}
    return name, {key: float(value) if re.fullmatch(r"[\d.]+", value) else value}


def weight_of(label: str) -> float:
    """The λ a label trains with (the LossSpec default unless it overrides weight)."""
    return float(parse_label(label)[1].get("weight", DEFAULT_WEIGHT))
