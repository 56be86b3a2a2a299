"""The names of the accuracy study's kept run records (bench/results/pretrained-runs/).

A record's file name is `<model>-<task>-<loss>-s<seed>-<digest>`: the in-process runner that
wrote the first protocol's records named a run by the digest of its spec (`run_digest`);
bench/study_records.py names a service study's run by its job id's digest instead. The
digest is kept so that tests can check every kept record is its study spec's run."""

from __future__ import annotations

import hashlib
from typing import Any

from jobs.spec import JobSpec

# The held-out scores a record's learning curve holds at each evaluation.
CURVE = ("exact_match", "mae", "within_5pct", "digit_accuracy", "parse_failure_rate")

# What identifies a run's training: fields added to JobSpec later (pinned sources, limits)
# do not change it, so a kept run's digest still names it after an upgrade.
RUN_FIELDS: dict[str, Any] = {
    "name": True,
    "model": {"source", "use_chat_template"},
    **dict.fromkeys(("data", "loss", "train", "scaling", "max_failures", "register_as"), True),
}

# Spec fields added after the kept runs were made (table tasks, per-run decodings, a
# validation split beside the test split): left out of a digest while at their defaults.
LATER_FIELDS: dict[str, tuple[str, ...]] = {
    "data": ("target", "features", "template", "decimals", "units", "validation_size"),
    "train": ("eval_decodings", "eval_samples"),
}


def later_at_default(spec: JobSpec) -> dict[str, set[str]]:
    """The LATER_FIELDS of `spec` that still hold their defaults (pydantic's `exclude`)."""
    out: dict[str, set[str]] = {}
    for part, names in LATER_FIELDS.items():
        model = getattr(spec, part)
        fields = type(model).model_fields
        out[part] = {n for n in names if getattr(model, n) == fields[n].get_default()}
    return out


def run_digest(spec: JobSpec) -> str:
    """A run's digest: its RUN_FIELDS, less the later fields at their defaults."""
    dumped = spec.model_dump_json(include=RUN_FIELDS, exclude=later_at_default(spec))
    return hashlib.sha256(dumped.encode()).hexdigest()[:8]


def run_id(label: str, task: str, loss_label: str, seed: int, digest: str) -> str:
    """`char-add-emd_weight-0.1-s0-1a2b3c4d`: a run record's name (letters, digits, . _ -)."""
    loss = loss_label.replace("[", "_").replace("]", "").replace("=", "-")
    return f"{label}-{task}-{loss}-s{seed}-{digest}"
