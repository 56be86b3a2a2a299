"""`tune_lr.per_arm`: every arm sweeps its own learning rate with the same budget (equal
footing both ways, bench/protocol-2.md), and each arm's runs wait for its own sweep alone.
Spec, expansion, and the study loop with Ray stubbed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from jobs.spec import JobSpec, StudySpec, TuneSpec
from service.studies.expand import first_jobs
from tests.support.api import auth, token_for
from tests.support.studies import app_on, body, finish, one_pass, services, study, upload

PER_ARM = {"low": 1e-5, "high": 3e-4, "num_samples": 2, "per_arm": True}
SMMD = {"name": "smmd", "bandwidth": 0.59, "weight": 0.92}


def test_every_arm_gets_its_own_lr_sweep_on_one_footing() -> None:
    spec = StudySpec.model_validate(
        study(arms=[SMMD, {"tuned": "emd", "num_samples": 2}], tune_lr=PER_ARM)
    )
    jobs = first_jobs(spec)
    assert [(run["arm"], kind) for run, kind, _, _ in jobs] == [
        ("ce", "tune"),
        ("smmd", "tune"),
        ("emd-tuned", "tune"),
    ]
    sweeps = [job for *_, job in jobs]
    assert all(isinstance(s, TuneSpec) for s in sweeps)
    ce, smmd, emd = (s for s in sweeps if isinstance(s, TuneSpec))
    # The fixed arm sweeps lr alone, at its own loss knobs; the tuned arm lr and its space.
    assert set(ce.space) == set(smmd.space) == {"lr"}
    assert (smmd.base.loss.name, smmd.base.loss.bandwidth, smmd.base.loss.weight) == (
        "smmd",
        0.59,
        0.92,
    )
    assert ce.base.loss.name == "ce" and set(emd.space) == {"weight", "lr"}
    # One footing: budget, search, early stopping, validation rows, seed, rate range.
    same = ("num_samples", "asha", "search", "metric")
    assert len({tuple(repr(getattr(s, f)) for f in same) for s in (ce, smmd, emd)}) == 1
    assert ce.base.data == smmd.base.data == emd.base.data
    assert ce.base.data.eval_split == "validation"
    assert ce.base.train == smmd.base.train == emd.base.train
    assert ce.space["lr"] == smmd.space["lr"] == emd.space["lr"]
    assert ce.name != smmd.name  # distinct sweeps, distinct names


def test_without_per_arm_only_ces_sweep_comes_first() -> None:
    spec = StudySpec.model_validate(study(arms=[SMMD], tune_lr={**PER_ARM, "per_arm": False}))
    assert [run["arm"] for run, *_ in first_jobs(spec)] == ["ce"]


def _job(client: TestClient, job_id: str) -> JobSpec:
    row = services(client).jobs.get(job_id)
    assert row is not None and isinstance(row.spec, JobSpec)
    return row.spec


def test_each_arm_trains_at_the_rate_its_own_sweep_chose(tmp_path: Path) -> None:
    with TestClient(app_on(tmp_path)) as client:
        ann = token_for(client, "ann", "submit")
        sent: dict[str, Any] = body(upload(client, ann), arms=[SMMD], seeds=[0, 1])
        sent["tune_lr"] = PER_ARM
        r = client.post("/v1/studies", json=sent, headers=auth(ann))
        assert r.status_code == 202, r.text
        study_id, runs = r.json()["id"], r.json()["runs"]
        assert [(x["arm"], x["kind"]) for x in runs] == [("ce", "tune"), ("smmd", "tune")]
        svc = services(client)
        # smmd's sweep ends first: its runs start at its rate, ce's wait for ce's sweep.
        finish(svc, runs[1]["job_id"], {"best_config": {"lr": 7e-5}})
        one_pass(svc)
        got = client.get(f"/v1/studies/{study_id}", headers=auth(ann)).json()["runs"]
        jobs = [x for x in got if x["kind"] == "job"]
        assert [(x["arm"], x["seed"]) for x in jobs] == [("smmd", 0), ("smmd", 1)]
        for x in jobs:
            spec = _job(client, x["job_id"])
            assert spec.train.lr == 7e-5 and spec.loss.bandwidth == 0.59
        finish(svc, runs[0]["job_id"], {"best_config": {"lr": 2e-5}})
        one_pass(svc)
        got = client.get(f"/v1/studies/{study_id}", headers=auth(ann)).json()["runs"]
        ce = [x for x in got if x["kind"] == "job" and x["arm"] == "ce"]
        assert [x["seed"] for x in ce] == [0, 1]
        assert {_job(client, x["job_id"]).train.lr for x in ce} == {2e-5}
        one_pass(svc)  # once only
        assert len(client.get(f"/v1/studies/{study_id}", headers=auth(ann)).json()["runs"]) == 6


def test_each_run_is_readable_with_its_answers_as_soon_as_it_ended(tmp_path: Path) -> None:
    with TestClient(app_on(tmp_path)) as client:
        ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
        sent = body(upload(client, ann), seeds=[0, 1])
        study = client.post("/v1/studies", json=sent, headers=auth(ann)).json()
        first, *rest = [r for r in study["runs"] if r["kind"] == "job"]
        url = f"/v1/studies/{study['id']}/runs/{first['job_id']}"
        queued = client.get(url, headers=auth(ann)).json()
        assert queued["status"] == "queued" and queued["predictions"] is None
        finish(
            services(client), first["job_id"], {"metrics": {"eval_exact_match": 0.5}}, [True, False]
        )
        got = client.get(url, headers=auth(ann))
        assert got.status_code == 200, got.text
        run = got.json()
        assert (run["arm"], run["seed"], run["status"]) == (
            first["arm"],
            first["seed"],
            "succeeded",
        )
        assert [a["correct"] for a in run["predictions"]] == [True, False]
        assert (
            run["metrics"]["exact_match"] == 0.5 and run["spec"]["train"]["seed"] == first["seed"]
        )
        assert run["intervals"] == {}  # no calibration record in its checkpoint
        # The rest of the study has not ended: it is still running, its result not built.
        assert client.get(f"/v1/studies/{study['id']}", headers=auth(ann)).json()["result"] is None
        assert rest
        # Another owner, or a job that is not one of the study's runs: missing.
        assert client.get(url, headers=auth(bob)).status_code == 404
        other = f"/v1/studies/{study['id']}/runs/job-nope"
        assert client.get(other, headers=auth(ann)).status_code == 404
