"""/v1/studies with Ray stubbed: a study is checked whole and recorded with all its first
jobs (or nothing), owned like jobs, cancellable as a whole; the study loop adds a tuned
arm's runs after its sweep, and compares the arms once every run ended — also in a
process started after the one that took the study (all its state is in the database)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.store import StudyStore
from tests.support.api import auth, token_for
from tests.support.studies import (
    app_on,
    body,
    client,
    finish,
    metrics,
    one_pass,
    services,
    upload,
)

__all__ = ["client"]  # the fixture, from the support package


def test_submit_expands_into_queued_jobs_owned_like_jobs(client: TestClient) -> None:
    ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
    r = client.post("/v1/studies", json=body(upload(client, ann)), headers=auth(ann))
    assert r.status_code == 202, r.text
    study = r.json()
    assert study["status"] == "running" and study["arms"] == ["ce", "smmd"]
    assert [(x["arm"], x["seed"], x["status"]) for x in study["runs"]] == [
        (arm, seed, "queued") for seed in (0, 1, 2) for arm in ("ce", "smmd")
    ]
    jobs = client.get("/v1/jobs", params={"status": "queued"}, headers=auth(ann)).json()["items"]
    assert {j["id"] for j in jobs} == {x["job_id"] for x in study["runs"]}
    # Its uploaded file was resolved once, at submit, for every job.
    assert all(j["spec"]["data"]["path"] for j in jobs)
    assert client.get(f"/v1/studies/{study['id']}", headers=auth(ann)).json()["id"] == study["id"]
    assert [s["id"] for s in client.get("/v1/studies", headers=auth(ann)).json()["items"]] == [
        study["id"]
    ]
    # Another owner sees nothing, and cannot cancel it.
    assert client.get(f"/v1/studies/{study['id']}", headers=auth(bob)).status_code == 404
    assert client.get(f"/v1/studies/{study['id']}/curves", headers=auth(bob)).status_code == 404
    assert client.post(f"/v1/studies/{study['id']}/cancel", headers=auth(bob)).status_code == 404
    assert client.get("/v1/studies", headers=auth(bob)).json()["items"] == []
    # An Idempotency-Key replays the study (no second set of jobs); another body is a 409.
    file_id = study["spec"]["base"]["data"]["file"]
    keyed = {**auth(ann), "Idempotency-Key": "k1"}
    first = client.post("/v1/studies", json=body(file_id, name="again"), headers=keyed)
    again = client.post("/v1/studies", json=body(file_id, name="again"), headers=keyed)
    assert again.json()["id"] == first.json()["id"] and again.headers["Idempotent-Replayed"]
    assert (
        client.post("/v1/studies", json=body(file_id, name="other"), headers=keyed).status_code
        == 409
    )
    assert len(client.get("/v1/jobs", headers=auth(ann)).json()["items"]) == 12
    # Writing needs a token.
    assert client.post("/v1/studies", json=body("file-" + "0" * 24)).status_code == 401


def test_a_bad_study_is_a_422_naming_the_field_and_records_nothing(tmp_path: Path) -> None:
    with TestClient(app_on(tmp_path, max_study_runs=5, max_trials=2)) as client:
        ann = token_for(client, "ann", "submit")
        file_id = upload(client, ann)
        cases = [
            (body(file_id, arms=[{"name": "l2"}]), "arms"),
            (body("file-" + "0" * 24), "base.data.file"),
            (body(file_id), "seeds"),  # 6 runs over this service's 5
            (
                body(file_id, seeds=[0, 1], arms=[{"tuned": "smmd", "num_samples": 3}]),
                "arms[0].num_samples",
            ),
            (body(file_id, seeds=[0, 1], sweeps={"seed": 1}), "sweeps.seed"),
        ]
        for bad, field in cases:
            r = client.post("/v1/studies", json=bad, headers=auth(ann))
            assert r.status_code == 422, r.text
            assert r.json()["error"] in ("invalid_spec", "invalid_request")
            assert field in r.text, r.text
        assert client.get("/v1/jobs", headers=auth(ann)).json()["items"] == []
        assert client.get("/v1/studies", headers=auth(ann)).json()["items"] == []


def test_cancel_cancels_its_queued_jobs(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    study = client.post("/v1/studies", json=body(upload(client, ann)), headers=auth(ann)).json()
    done = client.post(f"/v1/studies/{study['id']}/cancel", headers=auth(ann))
    assert done.status_code == 202, done.text
    assert done.json()["status"] == "cancelled"
    assert {x["status"] for x in done.json()["runs"]} == {"cancelled"}
    assert client.post(f"/v1/studies/{study['id']}/cancel", headers=auth(ann)).status_code == 409
    one_pass(services(client))  # a cancelled study is not followed: nothing changes
    assert (
        client.get(f"/v1/studies/{study['id']}", headers=auth(ann)).json()["status"] == "cancelled"
    )


def test_a_restarted_service_compares_the_arms_once_every_run_ended(tmp_path: Path) -> None:
    with TestClient(app_on(tmp_path)) as client:
        ann = token_for(client, "ann", "submit")
        study = client.post("/v1/studies", json=body(upload(client, ann)), headers=auth(ann)).json()
    # A new process on the same database: nothing of the first one is needed.
    with TestClient(app_on(tmp_path)) as client:
        svc = services(client)
        exact = {("ce", 0): 0.5, ("ce", 1): 0.6, ("ce", 2): 0.4,
                 ("smmd", 0): 0.75, ("smmd", 1): 0.7, ("smmd", 2): 0.6}  # fmt: skip
        runs = study["runs"]
        answers = [True, True, False, False]  # the bootstrap's questions (4 per run)
        for run in runs[:-1]:
            finish(svc, run["job_id"], metrics(exact[run["arm"], run["seed"]]), answers)
            svc.jobs.add_metrics(run["job_id"], 0, [{"step": 2, "eval_exact_match": 0.1}])
        one_pass(svc)  # one run still queued: no result yet
        assert client.get(f"/v1/studies/{study['id']}", headers=auth(ann)).json()["result"] is None
        last = runs[-1]
        finish(svc, last["job_id"], metrics(exact[last["arm"], last["seed"]]), answers)
        one_pass(svc)
        done = client.get(f"/v1/studies/{study['id']}", headers=auth(ann)).json()
        assert done["status"] == "succeeded", done
        comparison = done["result"]["comparison"]
        assert comparison["primary"] == "exact_match" and comparison["baseline"] == "ce"
        smmd = next(a for a in comparison["arms"] if a["arm"] == "smmd")
        # Paired differences 0.25, 0.10, 0.20: their mean, worked by hand.
        assert smmd["vs_ce"]["diff"] == pytest.approx(0.55 / 3)
        assert smmd["vs_ce"]["wins"] == 3 and smmd["vs_ce"]["p_holm"] is not None
        assert smmd["verdict"]
        assert smmd["vs_ce"]["boot_seeds"] == 3 and smmd["vs_ce"]["p_boot"] is not None
        assert {r["job_id"] for r in done["result"]["runs"]} == {r["job_id"] for r in runs}
        assert all(len(r["predictions"]) == 4 for r in done["result"]["runs"])
        svg = client.get(f"/v1/studies/{study['id']}/curves", headers=auth(ann))
        assert svg.headers["content-type"].startswith("image/svg+xml")
        assert 'data-series="ce"' in svg.text and 'data-series="smmd"' in svg.text


def test_a_tuned_arm_gets_its_runs_from_its_sweeps_best_values(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    spec = body(upload(client, ann), arms=[{"tuned": "smmd", "num_samples": 2}], seeds=[0, 1])
    study = client.post("/v1/studies", json=spec, headers=auth(ann)).json()
    sweep = study["runs"][0]
    assert (sweep["kind"], sweep["arm"], sweep["seed"]) == ("tune", "smmd-tuned", None)
    svc = services(client)
    one_pass(svc)  # the sweep has not ended: nothing added
    assert len(StudyStore(svc.db).get(study["id"]).runs) == 3  # type: ignore[union-attr]
    finish(svc, sweep["job_id"], {"best_config": {"weight": 0.9, "bandwidth": 1.1}})
    one_pass(svc)
    row = StudyStore(svc.db).get(study["id"])
    assert row is not None
    added = [r for r in row.runs if r["arm"] == "smmd-tuned" and r["kind"] == "job"]
    assert [r["seed"] for r in added] == [0, 1]
    for run in added:
        loss = svc.jobs.get(run["job_id"]).spec.loss.model_dump()  # type: ignore[union-attr]
        assert (loss["name"], loss["weight"], loss["bandwidth"]) == ("smmd", 0.9, 1.1)
    one_pass(svc)  # once only
    assert len(StudyStore(svc.db).get(study["id"]).runs) == 5  # type: ignore[union-attr]
