"""The accuracy study's Ray Tune sweeps, on a validation split carved from training rows.

A sweep's result is kept in the run-records folder when the study has one (the pretrained
protocol commits it): a later invocation on another machine reuses it instead of sweeping
again, and the record names the sweep's spec digest, so a changed sweep is never reused.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from accuracy_runs import write_validation_split

from jobs.spec import JobSpec, TuneSpec
from jobs.tune.sweep import run_tune

# What identifies a run's training: fields added to JobSpec later (pinned sources, limits)
# do not change it, so finished runs are found again after an upgrade.
RUN_FIELDS: dict[str, Any] = {
    "name": True,
    "model": {"source", "use_chat_template"},
    **dict.fromkeys(("data", "loss", "train", "scaling", "max_failures", "register_as"), True),
}

# Spec fields added after the kept runs were made (table tasks, per-run decodings, a
# validation split beside the test split): left out of a digest while at their defaults, so
# a kept run keeps its digest and is not run again only because the spec grew a field.
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


if TYPE_CHECKING:  # the plan imports this module: annotations only, no import cycle
    from accuracy_plan import Plan


def sweep_spec(plan: Plan, label: str, task: str, base: JobSpec, space: dict[str, Any]) -> TuneSpec:
    """A sweep of `space` over `base` (its loss, lr and seed) trained on the training rows
    minus a validation split and scored on that split."""
    val = plan.args.tune_val_size
    folder = plan.storage / "tune-data" / f"{label}-{task}"
    train_path, val_path, n_train = write_validation_split(base, folder, val)
    steps = plan.args.tune_steps or base.train.steps or 1
    every = max(1, steps // 4)
    data = base.model_dump()
    data["data"] = {
        "task": "jsonl",
        "path": str(train_path),
        "eval_path": str(val_path),
        "train_size": n_train,
        "eval_size": val,
        "max_length": 96,
    }
    data["train"].update(
        steps=steps,
        warmup_steps=min(base.train.warmup_steps, steps - 1),
        eval_every=every,
        checkpoint_every=every,
        log_every=every,
        metric=plan.args.tune_metric,
    )
    threads = plan.model(label).threads
    data["scaling"]["cpus_per_worker"] = 0.99 * threads  # + 0.01 for the trial driver
    return TuneSpec.model_validate(
        {
            "name": "acc-tune",
            "base": data,
            "space": space,
            "num_samples": plan.tune_samples(label, task),
            "search": "optuna",  # seeded (base.train.seed): the same command, same trials
            "asha": {"grace_period": every, "reduction_factor": 2},
            "metric": plan.args.tune_metric,
            "max_concurrent_trials": plan.workers,
        }
    )


def sweep(
    plan: Plan, label: str, task: str, base: JobSpec, space: dict[str, Any], name: str
) -> dict[str, Any]:
    """The best config of a sweep (run now, or read back from the run records)."""
    spec = sweep_spec(plan, label, task, base, space)
    spec = spec.model_copy(update={"name": name})
    fields = {**dict.fromkeys(TuneSpec.model_fields, True), "base": RUN_FIELDS}
    later = {"base": later_at_default(spec.base)}
    digest = hashlib.sha256(spec.model_dump_json(include=fields, exclude=later).encode())
    digest = digest.hexdigest()[:8]
    kept = plan.records / f"sweep-{name}-{task}-{digest}.json" if plan.records else None
    if kept is not None and kept.exists():
        return json.loads(kept.read_text())
    result = run_tune(spec, f"{name}-{digest}", str(plan.storage))
    if result.status != "succeeded":
        raise RuntimeError(f"the sweep {name} for {label}/{task} failed: {result}")
    metric = f"validation eval_{plan.args.tune_metric} {result.metrics}"
    steps = spec.base.train.steps
    found = {
        "config": result.best_config,
        "detail": f"{result.trials} trials x {steps} steps on {task}, best {metric}",
        "metrics": result.metrics,
        "digest": digest,
    }
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(found, indent=2) + "\n")
    return found
