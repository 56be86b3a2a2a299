"""Equal footing (`tune_lr`): ce's learning rate is swept before anything else of a study,
with the tuned arms' budget, scheduler, validation split and seed; then every run and every
tuned arm's sweep trains at the rate it chose. Spec, expansion, and the study loop with Ray
stubbed (the loop's state is in the database: a restarted service goes on)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from jobs.spec import JobSpec, StudySpec, TuneSpec
from jobs.spec.tune import ASHASpec
from service.store import StudyRow, StudyStore
from service.studies.expand import arm_jobs, first_jobs
from tests.support.api import auth, token_for
from tests.support.studies import (
    BASE,
    app_on,
    body,
    client,
    finish,
    one_pass,
    services,
    study,
    upload,
)

LR = {"low": 1e-5, "high": 3e-4}
__all__ = ["client"]  # the fixture, from the support package


def test_only_ces_lr_sweep_runs_first_with_the_tuned_arms_footing() -> None:
    spec = StudySpec.model_validate(
        study(arms=[{"name": "emd"}, {"tuned": "smmd", "num_samples": 6}], tune_lr=LR)
    )
    (run, kind, name, swept), *rest = first_jobs(spec)
    assert rest == []  # nothing else until it has chosen
    assert (run, kind, name) == ({"arm": "ce", "seed": None}, "tune", "units-ce-lr-sweep")
    assert isinstance(swept, TuneSpec)
    assert swept.base.loss.name == "ce" and set(swept.space) == {"lr"}
    assert (swept.space["lr"].kind, swept.space["lr"].low, swept.space["lr"].high) == (
        "loguniform",
        1e-5,
        3e-4,
    )
    # The same footing as the tuned arm's sweep: budget, scheduler, search, metric, data
    # (the validation split of the training rows) and seed; only the loss and space differ.
    tuned = spec.sweep_spec("smmd-tuned", spec.tuned_arms[0])
    assert swept.num_samples == tuned.num_samples == 6
    same = ("asha", "search", "metric", "max_concurrent_trials")
    assert [getattr(swept, f) for f in same] == [getattr(tuned, f) for f in same]
    assert swept.base.data == tuned.base.data and swept.base.data.eval_split == "validation"
    assert swept.base.train == tuned.base.train and swept.base.train.seed == spec.sweep_seed


def test_every_run_and_tuned_sweep_trains_at_the_chosen_rate() -> None:
    spec = StudySpec.model_validate(
        study(arms=[{"name": "emd"}, {"tuned": "smmd"}], tune_lr=LR, seeds=[0, 1])
    )
    jobs = arm_jobs(spec, 2.5e-5)
    assert [(run["arm"], run["seed"], kind) for run, kind, _, _ in jobs] == [
        ("smmd-tuned", None, "tune"),
        *[(arm, seed, "job") for seed in (0, 1) for arm in ("ce", "emd")],
    ]
    for _, _, _, job in jobs:
        trained = job.base if isinstance(job, TuneSpec) else job
        assert trained.train.lr == 2.5e-5
    # Without tune_lr nothing changes: the base's rate.
    plain = StudySpec.model_validate(study(arms=[{"name": "emd"}]))
    assert {j.train.lr for *_, j in first_jobs(plain) if isinstance(j, JobSpec)} == {1e-4}


def test_the_budget_is_the_tuned_arms_unless_given() -> None:
    spec = StudySpec.model_validate(study(arms=[{"tuned": "smmd", "num_samples": 3}], tune_lr=LR))
    assert spec.lr_samples == 3 and spec.lr_sweep_spec().num_samples == 3
    alone = StudySpec.model_validate(study(tune_lr={**LR, "num_samples": 5}))
    assert alone.lr_sweep_spec().num_samples == 5
    assert StudySpec.model_validate(study(tune_lr=LR)).lr_samples == 4


@pytest.mark.parametrize(
    ("over", "says"),
    [
        ({"tune_lr": {"low": 1e-3, "high": 1e-4}}, "high must be larger than low"),
        ({"tune_lr": {"low": 0, "high": 1e-4}}, "greater than 0"),
        ({"tune_lr": {"low": 1e-5, "high": 2}}, "less than or equal to 1"),
        ({"tune_lr": {**LR, "num_samples": 0}}, "greater than or equal to 1"),
        ({"tune_lr": {**LR, "grid": True}}, "Extra inputs"),
        ({"tune_lr": {**LR, "num_samples": 6}, "arms": [{"tuned": "smmd"}]}, "one budget"),
        ({"tune_lr": LR, "arms": [{"tuned": "smmd"}, {"tuned": "emd", "num_samples": 2}]},
         "[2, 4] trials"),
    ],
)  # fmt: skip
def test_bad_lr_sweeps_name_the_field(over: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError) as error:
        StudySpec.model_validate(study(**over))
    assert "tune_lr" in str(error.value) and says in str(error.value), str(error.value)


# ---- the study loop --------------------------------------------------------------------


def lr_body(file_id: str, **over: Any) -> dict[str, Any]:
    arms = [{"name": "emd"}, {"tuned": "smmd", "num_samples": 2}]
    return body(file_id, arms=arms, seeds=[0, 1], tune_lr={**LR, "num_samples": 2}, **over)


def row(client: TestClient, study_id: str) -> StudyRow:
    found = StudyStore(services(client).db).get(study_id)
    assert found is not None
    return found


def test_the_arms_wait_for_the_lr_sweep_then_train_at_its_rate(tmp_path: Path) -> None:
    with TestClient(app_on(tmp_path)) as client:
        ann = token_for(client, "ann", "submit")
        r = client.post("/v1/studies", json=lr_body(upload(client, ann)), headers=auth(ann))
        assert r.status_code == 202, r.text
        study_id, runs = r.json()["id"], r.json()["runs"]
        assert [(x["arm"], x["seed"], x["kind"], x["status"]) for x in runs] == [
            ("ce", None, "tune", "queued")
        ]
        one_pass(services(client))  # the sweep has not ended: nothing added
        assert len(row(client, study_id).runs) == 1
    # A new process on the same database takes it on.
    with TestClient(app_on(tmp_path)) as client:
        svc = services(client)
        finish(svc, runs[0]["job_id"], {"best_config": {"lr": 2.5e-5}})
        one_pass(svc)
        added = row(client, study_id).runs[1:]
        assert [(x["arm"], x["seed"], x["kind"]) for x in added] == [
            ("smmd-tuned", None, "tune"),
            *[(arm, seed, "job") for seed in (0, 1) for arm in ("ce", "emd")],
        ]
        for run in added:  # queued like any job, at the chosen rate
            job = svc.jobs.get(run["job_id"])
            assert job is not None and job.status == "queued"
            assert job.job_spec.train.lr == 2.5e-5
        one_pass(svc)  # once only
        assert len(row(client, study_id).runs) == 6
        finish(svc, added[0]["job_id"], {"best_config": {"weight": 0.5, "bandwidth": 2.0}})
        one_pass(svc)
        tuned = [x for x in row(client, study_id).runs if x["arm"] == "smmd-tuned"][1:]
        assert [x["seed"] for x in tuned] == [0, 1]
        for run in tuned:
            job = svc.jobs.get(run["job_id"])
            assert job is not None and isinstance(job.spec, JobSpec)
            assert (job.spec.loss.name, job.spec.loss.weight) == ("smmd", 0.5)
            assert job.spec.train.lr == 2.5e-5


@pytest.mark.parametrize(
    ("ending", "says"),
    [("failed", "failed: out of memory"), ("succeeded", "no learning rate")],
)
def test_a_failed_lr_sweep_fails_the_study_and_starts_nothing(
    client: TestClient, ending: str, says: str
) -> None:
    ann = token_for(client, "ann", "submit")
    study = client.post("/v1/studies", json=lr_body(upload(client, ann)), headers=auth(ann)).json()
    svc = services(client)
    sweep = study["runs"][0]["job_id"]
    if ending == "failed":
        assert svc.jobs.transition(sweep, "queued", "submitted")
        assert svc.jobs.transition(sweep, "submitted", "failed", detail="out of memory")
    else:
        finish(svc, sweep, {"best_config": {}})
    one_pass(svc)
    done = client.get(f"/v1/studies/{study['id']}", headers=auth(ann)).json()
    assert done["status"] == "failed" and len(done["runs"]) == 1
    assert f"ce's learning-rate sweep {sweep}" in done["detail"] and says in done["detail"]
    assert "no run was started" in done["detail"]


def test_cancelling_while_the_lr_sweep_waits_cancels_it(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    study = client.post("/v1/studies", json=lr_body(upload(client, ann)), headers=auth(ann)).json()
    done = client.post(f"/v1/studies/{study['id']}/cancel", headers=auth(ann)).json()
    assert done["status"] == "cancelled"
    assert [x["status"] for x in done["runs"]] == ["cancelled"]
    one_pass(services(client))
    assert len(row(client, study["id"]).runs) == 1


def test_a_bad_lr_sweep_is_a_422_naming_the_field_and_records_nothing(tmp_path: Path) -> None:
    with TestClient(app_on(tmp_path, max_trials=2)) as client:
        ann = token_for(client, "ann", "submit")
        file_id = upload(client, ann)
        over_ceiling = {"tune_lr": {**LR, "num_samples": 3}, "arms": [{"name": "emd"}]}
        for over, field in [
            ({"tune_lr": {"low": 1e-3, "high": 1e-4}}, "tune_lr"),
            (over_ceiling, "tune_lr.num_samples"),  # this service's max_trials is 2
        ]:
            r = client.post("/v1/studies", json=body(file_id, **over), headers=auth(ann))
            assert r.status_code == 422, r.text
            assert field in r.text, r.text
        assert client.get("/v1/jobs", headers=auth(ann)).json()["items"] == []


def test_a_study_declares_its_sweeps_settings_and_every_sweep_takes_them() -> None:
    """A protocol fixes its sweeps in advance (`sweeps`): seed, validation rows, search and
    early stopping, the same for ce's learning-rate sweep and every tuned arm's."""
    plain = StudySpec.model_validate(study(arms=[{"tuned": "smmd"}], tune_lr=LR))
    default = plain.sweep_spec("smmd-tuned", plain.tuned_arms[0])
    assert (default.search, default.asha, default.base.train.seed) == ("random", None, 5)
    assert default.base.data.eval_size == plain.base.data.eval_size
    sweeps = {"seed": 1000, "validation_size": 30, "search": "optuna",
              "asha": {"grace_period": 3, "reduction_factor": 2}}  # fmt: skip
    base = {**BASE, "train": {**BASE["train"], "eval_every": 3}}  # ASHA compares evaluations
    spec = StudySpec.model_validate(
        study(base=base, arms=[{"tuned": "smmd"}], tune_lr=LR, sweeps=sweeps)
    )
    for swept in (spec.lr_sweep_spec(), spec.sweep_spec("smmd-tuned", spec.tuned_arms[0])):
        assert (swept.search, swept.base.train.seed) == ("optuna", 1000)
        assert swept.asha == ASHASpec(grace_period=3, reduction_factor=2)
        assert (swept.base.data.eval_split, swept.base.data.eval_size) == ("validation", 30)
    # The evaluation runs are untouched: same held-out questions, their own seeds.
    run = spec.run_spec("ce", spec.base.loss, 0)
    assert (run.data, run.train.seed) == (spec.base.data, 0)
