"""A study resumed on another service from its kept work (GET /v1/studies/{id}/kept, then
POST /v1/studies/resume): what finished is taken over, the rest is queued, and the result
is the one the study would have reached where it started. Two homes, Ray stubbed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from jobs.records.models import PREDICTIONS, DecodingScores, DecodingsRecord
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec, StudySpec, load_spec_file
from jobs.stats import QuestionRecord
from service.services import Services
from tests.support.api import auth, token_for
from tests.support.studies import app_on, checkpoint, finish, metrics, one_pass, services

PER_ARM = {"low": 1e-5, "high": 3e-4, "num_samples": 2, "per_arm": True}
TABLE = {
    "task": "table",
    "path": "bundled:penguins",
    "target": "body_mass_g",
    "template": "{species} penguin on {island}: body mass in g?",
    "eval_size": 8,
}
RATES = {"ce": 7e-5, "smmd": 4e-5}
EM = {("ce", 0): 0.5, ("ce", 1): 0.6, ("smmd", 0): 0.75, ("smmd", 1): 0.7}


def spec(**over: Any) -> dict[str, Any]:
    """A table study on bundled data (the same spec on any home, unlike an uploaded file)."""
    base = {"name": "b", "model": {"source": "random:tiny-char"}, "data": TABLE,
            "train": {"steps": 4}}  # fmt: skip
    return {"name": "pg", "base": base, "arms": [{"name": "smmd"}], "seeds": [0, 1],
            "tune_lr": PER_ARM, "decoding": "best_on_validation",
            "sweeps": {"validation_size": 8}, **over}  # fmt: skip


def decoded(svc: Services, job_id: str, em: float) -> None:
    """Its answers under two decodings, each scored on validation rows (`expected` better
    there, so best_on_validation chooses it) and on the held-out ones."""
    files = RunFiles.for_job(job_id, svc.settings.storage_root)
    scores = {}
    for name, file, shift in (("number_first", PREDICTIONS, 0.0),
                              ("expected", "predictions-expected.jsonl", 0.125)):  # fmt: skip
        right = [i < 8 * (em + shift) for i in range(8)]
        files.write_predictions([
            QuestionRecord(target="4200", prediction="4200" if ok else "3900", value=4200.0 if ok
                           else 3900.0, target_value=4200.0, correct=ok, abs_error=0 if ok else 300)
            for ok in right
        ], file)  # fmt: skip
        scores[name] = DecodingScores(
            metrics={"exact_match": em + shift, "mae": 300 * (1 - em - shift)},
            predictions=file,
            validation={"exact_match": 0.3 + shift, "mae": 100.0 - shift},
        )
    record = DecodingsRecord(
        primary="number_first", samples=16, validation_rows=8, scores=scores, seconds={}
    )
    files.write_decodings(record)


def end_run(svc: Services, run: dict[str, Any], folder: Path) -> None:
    """One evaluation run ended with its answers and a calibrated checkpoint."""
    arm, seed = run["arm"], run["seed"]
    figures = (0.9, 1.4 + 0.1 * seed, 300.0 + 10 * seed) if arm == "ce" else \
              (0.85, 0.4 + 0.05 * seed, 120.0 + 20 * seed)  # fmt: skip
    ckpt = checkpoint(folder / f"{arm}-{seed}", *figures)
    decoded(svc, run["job_id"], EM[arm, seed])
    finish(svc, run["job_id"], metrics(EM[arm, seed]), best_checkpoint=ckpt)


def started(client: TestClient, token: str) -> tuple[dict[str, Any], Services]:
    """The study posted, both sweeps ended at their rates and its runs added."""
    sent = client.post("/v1/studies", json=spec(), headers=auth(token))
    assert sent.status_code == 202, sent.text
    svc = services(client)
    for run in sent.json()["runs"]:
        finish(svc, run["job_id"], {"best_config": {"lr": RATES[run["arm"]]}})
    one_pass(svc)
    study = client.get(f"/v1/studies/{sent.json()['id']}", headers=auth(token)).json()
    return study, svc


def evaluation(study: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in study["runs"] if r["kind"] == "job"]


def kept_elsewhere(home: Path, runs: int) -> dict[str, Any]:
    """The kept work of the study on a home of its own, with its first `runs` runs ended."""
    with TestClient(app_on(home)) as a:
        ann = token_for(a, "ann", "submit")
        study, svc = started(a, ann)
        for run in evaluation(study)[:runs]:
            end_run(svc, run, home / "ckpt")
        found: dict[str, Any] = a.get(f"/v1/studies/{study['id']}/kept", headers=auth(ann)).json()
    return found


def test_a_resumed_study_takes_over_what_ended_and_reaches_the_same_result(
    tmp_path: Path,
) -> None:
    with TestClient(app_on(tmp_path / "a")) as a:
        ann = token_for(a, "ann", "submit")
        study, svc = started(a, ann)
        *first, last = evaluation(study)
        for run in first:
            end_run(svc, run, tmp_path / "ckpt-a")
        kept = a.get(f"/v1/studies/{study['id']}/kept", headers=auth(ann))
        assert kept.status_code == 200, kept.text
        end_run(svc, last, tmp_path / "ckpt-a")
        one_pass(svc)
        where_it_started = a.get(f"/v1/studies/{study['id']}", headers=auth(ann)).json()
    assert where_it_started["status"] == "succeeded"
    work = kept.json()
    assert (len(work["sweeps"]), len(work["runs"])) == (2, 3)
    shutil_gone(tmp_path / "ckpt-a")  # the old machine's checkpoints are gone with it

    with TestClient(app_on(tmp_path / "b")) as b:
        ann = token_for(b, "ann", "submit")
        r = b.post("/v1/studies/resume", json={"spec": spec(), "kept": work}, headers=auth(ann))
        assert r.status_code == 202, r.text
        resumed, svc = r.json(), services(b)
        by = {(x["arm"], x["seed"]): x for x in resumed["runs"]}
        # Sweeps and the three ended runs taken over, naming the jobs that ran them.
        origin = {(x["arm"], x["seed"]): x["job_id"] for x in study["runs"]}
        for key, x in by.items():
            ended = key != (last["arm"], last["seed"])
            assert x["status"] == ("succeeded" if ended else "queued"), x
            assert x["kept_from"] == (origin[key] if ended else None)
            assert x["job_id"] != origin[key]
        # The run left to do trains at its arm's kept rate, as it would have there.
        row = svc.jobs.get(by[last["arm"], last["seed"]]["job_id"])
        assert row is not None and isinstance(row.spec, JobSpec)
        assert row.spec.train.lr == RATES[last["arm"]]
        # Its weights stayed where it ran: registering it here says so, naming that job.
        adopted = by["ce", 0]
        sent = b.post("/v1/models/pg/versions", json={"job_id": adopted["job_id"]},
                      headers=auth(ann))  # fmt: skip
        assert sent.status_code == 422 and sent.json()["detail"][0]["field"] == "checkpoint"
        assert f"taken over from {adopted['kept_from']}" in sent.json()["detail"][0]["message"]
        end_run(svc, by[last["arm"], last["seed"]], tmp_path / "ckpt-b")
        one_pass(svc)
        resumed = b.get(f"/v1/studies/{resumed['id']}", headers=auth(ann)).json()
        run_url = f"/v1/studies/{resumed['id']}/runs/{by['ce', 0]['job_id']}"
        one = b.get(run_url, headers=auth(ann)).json()
    assert resumed["status"] == "succeeded", resumed
    # Runs are named by the job that trained them: only the last one ran anew.
    renamed = {by[last["arm"], last["seed"]]["job_id"]: last["job_id"]}
    for key in ("comparison", "intervals", "decodings", "reference", "missing"):
        got = json.dumps(resumed["result"][key])
        for new, old in renamed.items():
            got = got.replace(new, old)
        assert json.loads(got) == where_it_started["result"][key], key
    assert resumed["result"]["decodings"]["smmd"]["decoding"] == "expected"
    # A taken-over run reads as it did where it ran: its answers and its interval.
    assert len(one["predictions"]) == 8 and one["intervals"]["interval_score_90"] == 300.0
    assert kept_files(work) == {"predictions.jsonl", "predictions-expected.jsonl"}


def kept_files(work: dict[str, Any]) -> set[str]:
    return {name for run in work["runs"] for name in run["answers"]}


def shutil_gone(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder)
    assert not folder.exists()


def test_kept_work_the_study_would_not_build_is_refused_and_nothing_is_recorded(
    tmp_path: Path,
) -> None:
    work = kept_elsewhere(tmp_path / "a", runs=4)
    moved = json.loads(json.dumps(work))
    moved["runs"][0]["spec"]["train"]["lr"] = 1e-3  # not the rate its sweep chose
    lone = {**work, "sweeps": [s for s in work["sweeps"] if s["arm"] != "smmd"]}
    twice = {**work, "runs": [*work["runs"], work["runs"][0]]}
    stranger = json.loads(json.dumps(work))
    stranger["runs"][0]["arm"] = "emd"
    seeded = json.loads(json.dumps(work))
    seeded["runs"][1]["seed"] = 7
    cases = [
        (moved, "kept.runs[0].spec", "train.lr"),
        (lone, "kept.runs[2]", "its arm's sweep is not kept"),
        (twice, "kept.runs[4]", "kept twice"),
        (stranger, "kept.runs[0]", "no such arm"),
        (seeded, "kept.runs[1]", "no seed 7"),
    ]
    with TestClient(app_on(tmp_path / "b")) as b:
        ann = token_for(b, "ann", "submit")
        for work_sent, field, words in cases:
            r = b.post("/v1/studies/resume", json={"spec": spec(), "kept": work_sent},
                       headers=auth(ann))  # fmt: skip
            assert r.status_code == 422, r.text
            found = [p for p in r.json()["detail"] if p["field"] == field]
            assert found and words in found[0]["message"], r.json()
        assert b.get("/v1/studies", headers=auth(ann)).json()["items"] == []
        folder = Path(services(b).settings.storage_root, "runs")
    assert not folder.is_dir() or list(folder.iterdir()) == []  # no adopted file was written


def test_kept_work_is_read_by_its_owner_only_and_keeps_an_undefined_metric(
    tmp_path: Path,
) -> None:
    with TestClient(app_on(tmp_path)) as client:
        ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
        study, svc = started(client, ann)
        run = evaluation(study)[0]
        nan = {"metrics": {"eval_exact_match": 0.0, "eval_mae": float("nan")}}
        finish(svc, run["job_id"], nan, [False] * 8)
        url = f"/v1/studies/{study['id']}/kept"
        assert client.get(url, headers=auth(bob)).status_code == 404
        text = client.get(url, headers=auth(ann)).text
    kept = json.loads(text)  # Python's reader takes NaN back as NaN
    value = kept["runs"][0]["result"]["metrics"]["eval_mae"]
    assert value != value  # NaN, not null: the run's MAE stays undefined, not 0
    assert kept["runs"][0]["answers"]["predictions.jsonl"][0]["correct"] is False


def test_a_resume_is_no_dry_run_and_an_answers_file_must_be_one_its_run_names(
    tmp_path: Path,
) -> None:
    work = kept_elsewhere(tmp_path / "a", runs=1)
    odd = json.loads(json.dumps(work))
    odd["runs"][0]["answers"]["../result.json"] = []
    # A decoding whose answers would be read from another of the run's files.
    aimed = json.loads(json.dumps(work))
    aimed["runs"][0]["decodings"]["scores"]["expected"]["predictions"] = "metrics.jsonl"
    with TestClient(app_on(tmp_path / "b")) as b:
        ann = token_for(b, "ann", "submit")
        r = b.post("/v1/studies/resume", json={"spec": {**spec(), "dry_run": True},
                                                "kept": work}, headers=auth(ann))  # fmt: skip
        assert r.status_code == 422 and r.json()["detail"][0]["field"] == "spec.dry_run", r.text
        r = b.post("/v1/studies/resume", json={"spec": spec(), "kept": odd}, headers=auth(ann))
        assert r.status_code == 422, r.text
        assert "not an answers file" in r.text and "kept" in r.json()["detail"][0]["field"]
        r = b.post("/v1/studies/resume", json={"spec": spec(), "kept": aimed}, headers=auth(ann))
        assert r.status_code == 422 and "not answers files" in r.text, r.text
        assert b.get("/v1/studies", headers=auth(ann)).json()["items"] == []


def test_protocol_2s_sweeps_carried_from_their_records_gate_its_runs(tmp_path: Path) -> None:
    """bench/p2_carried_sweeps.py: cell 2's ended sweeps, from records like the committed
    ones, are taken over by the study file as it is committed, and its 20 runs queue, each
    at its own arm's carried rate."""
    from bench.p2_carried_sweeps import from_record

    file = Path(__file__).parents[2] / "bench" / "studies" / "p2-penguins.yaml"
    sent = load_spec_file(file)
    spec = StudySpec.model_validate(sent)
    rates = {"ce": 9e-5, "emd": 2.5e-4, "smmd": 5e-5, "dist2": 1e-4}
    work = {"study": "study-old", "name": spec.name, "runs": [], "sweeps": [
        from_record(spec, arm, {"config": {"lr": lr}, "metrics": {"eval_mae": 250.0},
                                "job_id": f"tune-{arm}", "detail": "6 trials x 150 steps"})
        for arm, lr in rates.items()
    ]}  # fmt: skip
    with TestClient(app_on(tmp_path)) as client:
        ann = token_for(client, "ann", "submit")
        r = client.post("/v1/studies/resume", json={"spec": sent, "kept": work}, headers=auth(ann))
        assert r.status_code == 202, r.text
        svc, runs = services(client), r.json()["runs"]
        sweeps = [x for x in runs if x["kind"] == "tune"]
        assert [(x["arm"], x["status"], x["kept_from"]) for x in sweeps] == [
            (arm, "succeeded", f"tune-{arm}") for arm in rates
        ]
        jobs = [x for x in runs if x["kind"] == "job"]
        assert len(jobs) == 20 and {x["status"] for x in jobs} == {"queued"}
        for x in jobs:
            row = svc.jobs.get(x["job_id"])
            assert row is not None and isinstance(row.spec, JobSpec)
            assert (row.spec.train.lr, row.spec.train.seed) == (rates[x["arm"]], x["seed"])


def test_kept_work_has_a_body_limit_of_its_own(tmp_path: Path) -> None:
    """A kept study's answers pass the 1 MB cap every other body has; its own cap still
    holds (NUMTUNE_MAX_KEPT_BYTES)."""
    padded = {"spec": spec(), "kept": {"study": "s", "name": "pg", "pad": "x" * 1_200_000}}
    with TestClient(app_on(tmp_path, max_kept_bytes=2_000_000)) as client:
        ann = token_for(client, "ann", "submit")
        r = client.post("/v1/studies/resume", json=padded, headers=auth(ann))
        assert r.status_code == 422 and "kept.pad" in r.text, r.text  # read whole, then refused
        r = client.post("/v1/studies", json={**spec(), "pad": "x" * 1_200_000}, headers=auth(ann))
        assert r.status_code == 413, r.text
        over = {**padded, "kept": {**padded["kept"], "pad": "x" * 2_100_000}}
        assert client.post("/v1/studies/resume", json=over, headers=auth(ann)).status_code == 413
