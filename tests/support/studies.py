"""Studies with Ray stubbed: an app on a home of its own, the uploaded rows and study bodies
the tests post, runs ended as a run and the reconciler would end them, one pass of the study
loop, and a whole study finished with (or without) each run's calibrated intervals."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from jobs.calibration.record import CALIBRATION_FILE, Calibration, IntervalReport, LevelReport
from jobs.records.models import RunResult
from jobs.records.run_files import RunFiles
from jobs.stats import QuestionRecord
from service.app import create_app
from service.services import Services
from service.settings import Settings
from service.studies.progress import StudyLoop
from tests.support.api import ADMIN, auth, token_for
from tests.support.stub_backend import StubBackend

ROWS = "".join(
    json.dumps({"prompt": f"{i} km in m?", "answer": i * 1000}) + "\n" for i in range(12)
)
# A study's base job on data paths (the spec alone: nothing is uploaded).
BASE = {
    "name": "b",
    "model": {"source": "random:tiny-char"},
    "data": {"task": "jsonl", "path": "/d/train.jsonl", "eval_path": "/d/test.jsonl"},
    "train": {"steps": 10, "seed": 7},
}
# Each run's exact match, by (arm, seed), in finished_study.
EXACT = {("ce", 0): 0.5, ("ce", 1): 0.6, ("ce", 2): 0.4,
         ("smmd", 0): 0.75, ("smmd", 1): 0.7, ("smmd", 2): 0.6}  # fmt: skip


def app_on(home: Path, **settings: Any) -> FastAPI:
    return create_app(
        Settings(home=home, admin_token=ADMIN, **settings), backend=StubBackend(), reconcile=False
    )


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(app_on(tmp_path)) as c:
        yield c


def services(client: TestClient) -> Services:
    found: Services = client.app.state.services  # type: ignore[attr-defined]
    return found


def upload(client: TestClient, token: str) -> str:
    r = client.post("/v1/files", files={"file": ("rows.jsonl", ROWS.encode())},
                    data={"purpose": "fine-tune"}, headers=auth(token))  # fmt: skip
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def body(file_id: str, **over: Any) -> dict[str, Any]:
    base = {
        "name": "b",
        "model": {"source": "random:tiny-char"},
        "data": {"task": "jsonl", "file": file_id, "eval_file": file_id, "eval_size": 4},
        "train": {"steps": 4},
    }
    return {"name": "units", "base": base, "arms": [{"name": "smmd"}], "seeds": [0, 1, 2], **over}


def study(**over: Any) -> dict[str, Any]:
    return {"name": "units", "base": BASE, "arms": [{"name": "smmd"}], **over}


def bare_study(**over: Any) -> dict[str, Any]:
    """A study whose base names only a model and its steps (the default task), two seeds."""
    base = {"name": "b", "model": {"source": "random:tiny-char"}, "train": {"steps": 100}}
    return {"name": "st", "base": base, "arms": [{"name": "smmd"}], "seeds": [0, 1], **over}


def finish(
    svc: Services,
    job_id: str,
    result: dict[str, Any],
    answers: list[bool] | None = None,
    **fields: Any,
) -> None:
    """End a queued job as a run and the reconciler would: its result.json (and, given
    `answers`, a predictions.jsonl of that many right or wrong answers), then its row."""
    files = RunFiles.for_job(job_id, svc.settings.storage_root)
    done = RunResult(status="succeeded", metrics=result.get("metrics", {}))
    files.write_result(done)
    if answers is not None:
        files.write_predictions([
            QuestionRecord(target="10", prediction="10" if ok else "12", value=10.0 if ok else 12.0,
                           target_value=10.0, correct=ok, abs_error=0.0 if ok else 2.0)
            for ok in answers
        ])  # fmt: skip
    assert svc.jobs.transition(job_id, "queued", "submitted")
    stored = {**done.model_dump(mode="json"), **result}
    assert svc.jobs.transition(job_id, "submitted", "succeeded", result=stored, **fields)


def one_pass(svc: Services) -> None:
    StudyLoop(svc, lambda row: None, interval_s=1).run_once()


def metrics(em: float) -> dict[str, Any]:
    return {"metrics": {"eval_exact_match": em, "eval_mae": 10 * (1 - em), "eval_within_5pct": em}}


def report(coverage: float, width: float, score: float) -> IntervalReport:
    return IntervalReport(n=20, coverage=coverage, coverage_low=coverage - 0.2,
                          coverage_high=min(1.0, coverage + 0.1), with_interval=20,
                          width_mean=width * 100, relative_width_mean=width,
                          relative_width_median=width, winkler_mean=score)  # fmt: skip


def checkpoint(folder: Path, coverage: float, width: float, score: float) -> str:
    """A checkpoint folder whose calibration.json says these figures at the 90 % level (the
    50 % level around it, to show which one is read)."""
    folder.mkdir(parents=True)
    levels = [
        LevelReport(level=0.5, sampled=report(0.4, 0.1, 1.0), nested_parameter=0.5,
                    calibrated=report(0.5, 0.1, 1.0)),
        LevelReport(level=0.9, sampled=report(0.7, width / 2, score * 2), nested_parameter=1.5,
                    calibrated=report(coverage, width, score)),
    ]  # fmt: skip
    record = Calibration(n=20, samples=16, temperature=1.0, period=None, source="held-out",
                         method="5-fold cross-conformal", folds=5, levels=levels,
                         estimators={}, best="greedy")  # fmt: skip
    (folder / CALIBRATION_FILE).write_text(record.model_dump_json())
    return str(folder)


def finished_study(tmp_path: Path, calibrated: bool) -> dict[str, Any]:
    """A study of ce and smmd x 3 seeds, every run ended (with a checkpoint whose calibration
    gives ce wide intervals and worse scores, smmd narrower ones, if `calibrated`), compared
    by one pass of the study loop; its record as GET /v1/studies/{id} answers."""
    with TestClient(app_on(tmp_path)) as client:
        ann = token_for(client, "ann", "submit")
        study = client.post("/v1/studies", json=body(upload(client, ann)), headers=auth(ann)).json()
        svc = services(client)
        for run in study["runs"]:
            arm, seed = run["arm"], run["seed"]
            # ce's intervals: as wide as the answers (wide), worse scores; smmd's: narrower.
            figures = (0.9, 1.4 + 0.1 * seed, 300.0 + 10 * seed) if arm == "ce" else \
                      (0.85, 0.4 + 0.05 * seed, 120.0 + 20 * seed)  # fmt: skip
            folder = tmp_path / "ckpt" / f"{arm}-{seed}"
            fields: dict[str, Any] = (
                {"best_checkpoint": checkpoint(folder, *figures)} if calibrated else {}
            )
            finish(svc, run["job_id"], metrics(EXACT[arm, seed]), **fields)
        one_pass(svc)
        done: dict[str, Any] = client.get(f"/v1/studies/{study['id']}", headers=auth(ann)).json()
    assert done["status"] == "succeeded", done
    return done
