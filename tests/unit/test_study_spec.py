"""StudySpec: validated at the edge (a message naming the field) and expanded into the
ordinary jobs and sweeps a study runs (service/studies/expand.py:first_jobs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jobs.data import load_task
from jobs.spec import JobSpec, LossSpec, StudySpec, TuneSpec, load_spec_file
from service.studies.expand import first_jobs
from tests.support.studies import BASE, study


def problem(body: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as error:
        StudySpec.model_validate(body)
    return str(error.value)


def test_calibrated_primaries_with_enough_held_out_questions_validate() -> None:
    base = {**BASE, "calibration": {"questions": 12}}
    spec = StudySpec.model_validate(study(base=base, primary_metric=["interval_score_90", "crps"]))
    assert spec.primaries == ["interval_score_90", "crps"]


def test_defaults_are_the_issues() -> None:
    spec = StudySpec.model_validate(study())
    assert spec.seeds == [0, 1, 2, 3, 4]
    assert spec.primary_metric == "exact_match"
    assert spec.equivalence_margin == 0.02
    assert spec.promote is None
    assert spec.total_runs == 10  # (1 arm + ce) × 5 seeds


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        (study(arms=[{"name": "ce"}]), "arms", "baseline"),
        (study(arms=[{"tuned": "ce"}]), "tuned", "nothing to tune"),
        (study(arms=[]), "arms", "at least 1"),
        (study(seeds=[1, 1]), "seeds", "distinct"),
        (study(seeds=[3]), "seeds", "at least 2"),
        (study(seeds=list(range(20)), arms=[{"name": "emd"}] * 8), "", "180 runs"),
        (study(primary_metric="bleu"), "primary_metric", "exact_match"),
        (study(equivalence_margin=0), "equivalence_margin", "greater than 0"),
        (study(promote="9x"), "promote", "alias"),
        (study(name="Has Space"), "name", "a-z 0-9"),
        (study(name="x" * 41), "name", "at most 40"),
        (study(arms=[{"name": "smmd", "bandwidth": -1}]), "bandwidth", "greater than 0"),
        (study(arms=[{"tuned": "emd", "space": {"lr": {"kind": "choice", "values": [0.1]}}}]),
         "space", "loss fields only"),
        (study(surprise=1), "surprise", "Extra inputs"),
        (study(sweeps={"seed": 3}), "sweeps.seed", "evaluation seed"),
        (study(sweeps={"validation_size": 0}), "validation_size", "greater than or equal to 1"),
        (study(sweeps={"search": "grid"}), "search", "'random' or 'optuna'"),
        (study(sweeps={"asha": {"grace_period": 0}}), "grace_period", "greater than or equal"),
        (study(base={**BASE, "calibration": {"questions": 8}}, primary_metric=["mae",
               "interval_score_90"]), "base.calibration.questions", "at least 12 held-out"),
        (study(base={**BASE, "calibration": {"questions": 0}}, primary_metric="crps"),
         "base.calibration.questions", "at least 1 held-out"),
    ],
)  # fmt: skip
def test_bad_studies_name_the_field(body: dict[str, Any], field: str, says: str) -> None:
    message = problem(body)
    assert field in message and says in message, message


@pytest.mark.parametrize("task", ["jsonl", "jsonl+eval", "units"])
def test_a_sweep_validates_on_training_rows_only_on_any_task(task: str, tmp_path: Path) -> None:
    """A sweep trains on the rows the study's runs train on minus the last eval_size, and
    is scored on those: never on a question the runs are scored on (a JSONL test file is
    not even opened). Without a test file, and on a generated task, as well."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": f"{i}+1", "answer": i + 1}) + "\n"
                            for i in range(40)))  # fmt: skip
    data: dict[str, Any] = {"task": "units", "train_size": 30, "eval_size": 6}
    if task != "units":
        data = {"task": "jsonl", "path": str(rows), "eval_size": 6}
    if task == "jsonl+eval":
        data["eval_path"] = str(tmp_path / "test.jsonl")
        (tmp_path / "test.jsonl").write_text(rows.read_text().replace("+1", "+2"))
    spec = StudySpec.model_validate(study(base={**BASE, "data": data}, arms=[{"tuned": "smmd"}]))
    sweep = spec.sweep_spec("smmd-tuned", spec.tuned_arms[0])
    assert sweep.base.data.eval_split == "validation"
    run = load_task(spec.run_spec("ce", LossSpec(), 0).data)
    if task == "jsonl+eval":
        (tmp_path / "test.jsonl").unlink()  # the sweep never reads it
    tuning = load_task(sweep.base.data)
    assert [*tuning.train, *tuning.eval] == run.train and len(tuning.eval) == 6
    assert not {ex.prompt for ex in tuning.eval} & {ex.prompt for ex in run.eval}


def test_a_validation_split_leaves_training_rows() -> None:
    small = {**BASE, "data": {"task": "units", "train_size": 8, "eval_size": 8}}
    message = problem(study(base=small, arms=[{"tuned": "emd"}]))
    assert "eval_size" in message and "hold out fewer" in message
    message = problem(study(base={**BASE, "data": {"task": "units", "eval_split": "validation"}}))
    assert "base.data.eval_split" in message


def test_labels_are_unique_per_arm() -> None:
    spec = StudySpec.model_validate(
        study(arms=[{"name": "smmd"}, {"tuned": "smmd"}, {"name": "smmd", "bandwidth": 1.0}])
    )
    assert spec.labels() == ["smmd", "smmd-tuned", "smmd-2"]
    assert spec.arm("smmd-2") == LossSpec(name="smmd", bandwidth=1.0)


def test_expansion_runs_every_arm_and_ce_on_every_seed_on_the_same_questions() -> None:
    spec = StudySpec.model_validate(
        study(arms=[{"name": "smmd", "bandwidth": 1.5}, {"name": "emd"}], seeds=[0, 1, 2])
    )
    jobs = first_jobs(spec)
    assert [(run["arm"], run["seed"], kind) for run, kind, _, _ in jobs] == [
        (arm, seed, "job") for seed in (0, 1, 2) for arm in ("ce", "smmd", "emd")
    ]
    for run, _, name, body in jobs:
        job = JobSpec.model_validate(body)
        assert job.name == name == f"units-{run['arm']}-s{run['seed']}"
        assert job.train.seed == run["seed"]  # the study's seed, not the base's 7
        assert job.data == JobSpec.model_validate(BASE).data  # same data, same held-out split
        assert job.train.steps == 10 and job.register_as == "units"
    losses = {run["arm"]: JobSpec.model_validate(body).loss for run, _, _, body in jobs}
    assert losses["ce"].name == "ce"
    assert losses["smmd"] == LossSpec(name="smmd", bandwidth=1.5)


def test_a_tuned_arm_first_sweeps_on_training_rows_with_a_seed_no_run_uses() -> None:
    spec = StudySpec.model_validate(study(arms=[{"tuned": "smmd", "num_samples": 3}], seeds=[0, 4]))
    jobs = first_jobs(spec)
    (run, kind, name, body), *runs = jobs
    assert (run, kind, name) == (
        {"arm": "smmd-tuned", "seed": None},
        "tune",
        "units-smmd-tuned-sweep",
    )
    sweep = TuneSpec.model_validate(body)
    # Scored on the last eval_size training rows, not on the evaluation file.
    assert sweep.base.data.path == "/d/train.jsonl" and sweep.base.data.eval_split == "validation"
    assert sweep.base.train.seed == 5 and 5 not in spec.seeds
    assert set(sweep.space) == {"weight", "bandwidth"} and sweep.num_samples == 3
    assert sweep.base.loss.name == "smmd" and sweep.metric == "exact_match"
    # Only ce runs now; the tuned arm's runs wait for its sweep.
    assert [(r["arm"], r["seed"]) for r, *_ in runs] == [("ce", 0), ("ce", 4)]


def test_a_sweeps_best_values_become_the_tuned_arms_loss() -> None:
    spec = StudySpec.model_validate(study(arms=[{"tuned": "emd"}]))
    arm = spec.tuned_arms[0]
    assert set(arm.search_space()) == {"weight"}  # emd has no kernel bandwidth
    loss = spec.tuned_loss(arm, {"weight": 1.25, "not_a_loss_field": 3})
    assert loss == LossSpec(name="emd", weight=1.25)


def test_lower_is_better_primary_sweeps_on_mae() -> None:
    spec = StudySpec.model_validate(study(arms=[{"tuned": "emd"}], primary_metric="mae"))
    assert spec.sweep_spec("emd-tuned", spec.tuned_arms[0]).metric == "mae"


def test_the_example_study_validates() -> None:
    root = Path(__file__).resolve().parents[2]
    spec = StudySpec.model_validate(load_spec_file(root / "examples/studies/units-smmd.yaml"))
    assert spec.labels() == ["smmd", "emd"] and spec.total_runs == 15
