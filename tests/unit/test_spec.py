"""The contract refuses what cannot run, naming the field, before anything reaches Ray."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jobs.__main__ import main as jobs_main
from jobs.spec import JobSpec, LossSpec, TuneSpec, load_spec_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FLOAT_FIELDS = [
    "weight",
    "bandwidth",
    "squash",
    "smooth_weight",
    "sigma",
    "alpha",
    "beta",
    "gumbel_tau",
    "gumbel_noise",
]


def error_locs(error: ValidationError) -> set[str]:
    return {".".join(str(p) for p in e["loc"]) for e in error.errors()}


def test_loss_defaults_match_the_contract() -> None:
    spec = LossSpec()
    assert (spec.name, spec.weight, spec.mixing, spec.kernel) == ("ce", 0.3, "additive", "gaussian")
    assert (spec.bandwidth, spec.squash, spec.smooth_weight) == (2.0, None, "auto")
    assert (spec.sigma, spec.alpha, spec.beta) == (0.2, 0.2, 0.2)
    assert (spec.gumbel_tau, spec.gumbel_noise, spec.ntil_value) == (0.1, 0.01, "gumbel")


@pytest.mark.parametrize("field", FLOAT_FIELDS)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_refused_by_name(field: str, bad: float) -> None:
    with pytest.raises(ValidationError) as info:
        LossSpec.model_validate({field: bad})
    assert any(loc.startswith(field) for loc in error_locs(info.value))


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": "mse"}, "name"),
        ({"bandwidth": 0}, "bandwidth"),
        ({"weight": -0.1}, "weight"),
        ({"squash": 0.5}, "squash"),
        ({"smooth_weight": "sometimes"}, "smooth_weight"),
        ({"gumbel_tau": 0}, "gumbel_tau"),
        ({"kernel": "cosine"}, "kernel"),
        ({"bandwith": 2.0}, "bandwith"),  # a typo is an error, not ignored
    ],
)
def test_bad_loss_fields_are_named(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        LossSpec.model_validate(data)
    assert any(loc.startswith(field) for loc in error_locs(info.value))


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"train": {"steps": 0}}, "train.steps"),
        ({"train": {"steps": 10, "epochs": 1}}, "steps: give exactly one"),
        ({"train": {"steps": 10, "warmup_steps": 10}}, "warmup_steps"),
        ({"train": {"lr": math.nan}}, "train.lr"),
        ({"data": {"task": "jsonl"}}, "path"),
        ({"data": {"modules": ["integrate"]}}, "unknown modules"),
        ({"model": {"source": "random:huge"}}, "unknown random preset"),
        ({"model": {"source": "bundled:gpt5"}}, "unknown bundled model"),
        ({"scaling": {"gpus_per_worker": 1}}, "use_gpu"),
        ({"scaling": {"deepspeed": {"stage": 2, "offload_params": True}}}, "offload_params"),
        (
            {"scaling": {"deepspeed": {"stage": 2, "offload_optimizer": True}}},
            "offload_optimizer: offload moves state from GPU to host memory",
        ),
        (
            {"scaling": {"deepspeed": {"stage": 3, "offload_params": True}}},
            "offload_params: offload moves state from GPU to host memory",
        ),
        ({"scaling": {"deepspeed": {"stage": 4}}}, "scaling.deepspeed.stage"),
        ({"scaling": {"num_workers": 0}}, "scaling.num_workers"),
        (
            {"scaling": {"deepspeed": {"stage": 3}}, "train": {"precision": "bf16"}},
            "DeepSpeed bf16 needs GPUs",
        ),
        ({"name": "Bad Name"}, "name"),
        ({"register_as": "../etc"}, "register_as"),
        ({"max_failures": -1}, "max_failures"),
    ],
)
def test_conflicting_job_options_fail_at_validation(data: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate({"name": "job", **data})
    assert needle in str(info.value)


def test_epochs_alone_replace_the_default_steps() -> None:
    spec = JobSpec.model_validate({"name": "job", "train": {"epochs": 2}})
    assert spec.train.steps is None and spec.train.epochs == 2


def test_zero3_with_one_worker_is_fine() -> None:
    spec = JobSpec.model_validate({"name": "job", "scaling": {"deepspeed": {"stage": 3}}})
    assert spec.scaling.deepspeed is not None and spec.scaling.num_workers == 1


def test_offload_is_accepted_on_gpu_workers() -> None:
    ds = {"stage": 3, "offload_optimizer": True, "offload_params": True}
    spec = JobSpec.model_validate({"name": "job", "scaling": {"use_gpu": True, "deepspeed": ds}})
    assert spec.scaling.deepspeed is not None and spec.scaling.deepspeed.offload_params


def test_spec_json_round_trip() -> None:
    spec = JobSpec.model_validate(load_spec_file(EXAMPLES / "tiny-smmd.yaml"))
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec


@pytest.mark.parametrize(
    "name", ["tiny-smmd.yaml", "smollm2-arith-smmd.yaml", "char-units-emd.yaml", "demo-units.yaml"]
)
def test_example_job_specs_validate(name: str) -> None:
    JobSpec.model_validate(load_spec_file(EXAMPLES / name))


def _tune(**changes: Any) -> dict[str, Any]:
    data = load_spec_file(EXAMPLES / "tiny-tune-smmd.yaml")
    data.update(changes)
    return data


def test_example_sweep_validates_and_places_trial_values() -> None:
    spec = TuneSpec.model_validate(_tune())
    trial = spec.trial_spec({"bandwidth": 0.5, "weight": 0.7})
    assert (trial.loss.bandwidth, trial.loss.weight, trial.loss.name) == (0.5, 0.7, "smmd")
    assert trial.train == spec.base.train


@pytest.mark.parametrize(
    ("space", "needle"),
    [
        ({}, "empty"),
        ({"hidden_size": {"kind": "choice", "values": [1]}}, "cannot be tuned"),
        ({"bandwidth": {"kind": "loguniform", "low": 0, "high": 4}}, "low > 0"),
        ({"bandwidth": {"kind": "uniform", "low": -1, "high": 4}}, "greater than 0"),
        ({"weight": {"kind": "uniform", "low": 2, "high": 1}}, "smaller than high"),
        ({"name": {"kind": "choice", "values": ["emd", "nope"]}}, "space.name"),
        ({"weight": {"kind": "choice"}}, "non-empty list"),
    ],
)
def test_bad_search_spaces_are_named(space: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValidationError) as info:
        TuneSpec.model_validate(_tune(space=space))
    assert needle in str(info.value)


def test_optuna_cannot_take_grid_and_asha_needs_evaluations() -> None:
    grid = {"bandwidth": {"kind": "grid", "values": [1.0, 2.0]}}
    with pytest.raises(ValidationError, match="optuna"):
        TuneSpec.model_validate(_tune(space=grid, search="optuna"))
    data = _tune()
    data["base"]["train"].pop("eval_every")
    with pytest.raises(ValidationError, match="eval_every"):
        TuneSpec.model_validate(data)


def test_a_sweep_takes_its_time_limit_on_itself_not_on_its_base() -> None:
    data = _tune()
    data["base"]["timeout_s"] = 60
    with pytest.raises(ValidationError, match=r"base\.timeout_s"):
        TuneSpec.model_validate(data)
    assert TuneSpec.model_validate({**_tune(), "timeout_s": 60}).timeout_s == 60
    assert JobSpec.model_validate({"name": "j", "timeout_s": 60}).timeout_s == 60


def test_cli_names_the_bad_field_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nloss: {name: emd, bandwidth: -1}\n")
    assert jobs_main(["run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "loss.bandwidth" in err and "Traceback" not in err
    assert jobs_main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err
