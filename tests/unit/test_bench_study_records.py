"""bench/study_records.py's own logic: a service study's arms named as the bench names them,
and a records folder that never keeps two runs of one part, loss and seed. (Its REST side,
on a real study: tests/e2e/test_study_e2e.py.)"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import ModuleType

import pytest
from fastapi.testclient import TestClient

from bench import study_records
from jobs.spec import StudySpec, load_spec_file
from service.cli.client import Client, ClientError
from tests.support.api import token_for
from tests.support.studies import app_on

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def records() -> ModuleType:
    return study_records


def test_the_study_arms_get_the_bench_labels(records: ModuleType) -> None:
    spec = StudySpec.model_validate(load_spec_file(BENCH / "studies" / "smollm2-units.yaml"))
    labels = ["ce", *spec.labels()]
    assert labels == ["ce", "emd", "smmd-tuned", "del"]
    found = [records.loss_label(spec, label) for label in labels]
    # The names bench/protocol.md's table uses (readme_pretrained reads these).
    assert found == ["ce", "emd", "smmd_tuned", "del[weight=1]"]
    several = spec.model_copy(update={"arms": [*spec.arms, spec.arms[0].model_copy(
        update={"bandwidth": 3.0, "weight": 0.5})]})  # fmt: skip
    assert several.labels()[-1] == "emd-2"
    assert records.loss_label(several, "emd-2") == "emd_2"  # two knobs: the study's own name


def record(part: str, loss: str, seed: int, job_id: str) -> dict[str, object]:
    return {"part": part, "loss": loss, "seed": seed, "job_id": job_id}


def test_a_folder_keeps_one_run_per_part_loss_and_seed(records: ModuleType, tmp_path: Path) -> None:
    first = {
        "a.json": record("units", "ce", 0, "job-1"),
        "b.json": record("units", "emd", 0, "job-2"),
    }
    sweep = {"sweep-study-tune-lr-smollm2-units-0123abcd.json": {"config": {"lr": 1e-4}}}
    records.keep(tmp_path, first, sweep)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*first, *sweep])
    assert json.loads((tmp_path / "a.json").read_text()) == first["a.json"]
    records.keep(tmp_path, first, {})  # the same runs again: nothing clashes
    other = {"c.json": record("units", "emd", 0, "job-9"), "d.json": record("units", "ce", 1, "j")}
    with pytest.raises(ClientError, match=r"--records .* already keeps other runs of units/emd/s0"):
        records.keep(tmp_path, other, {})
    assert not (tmp_path / "d.json").exists()  # refused whole: nothing of it written


def test_the_jsonl_cell_is_posted_with_its_questions_uploaded(
    records: ModuleType, tmp_path: Path
) -> None:
    """`--spec bench/studies/smollm2-jsonl.yaml --questions N` as the REST API takes it (Ray
    stubbed): the generated questions uploaded as a file, the base reading that file (not
    the placeholder path), ce's learning-rate sweep queued first."""
    with TestClient(app_on(tmp_path)) as http:
        http.headers["Authorization"] = f"Bearer {token_for(http, 'ann', 'submit')}"
        client = Client("http://testserver", None)
        client.http = http  # the real API in this process, Ray stubbed
        study = records.post(client, BENCH / "studies" / "smollm2-jsonl.yaml", 400)
        data = study["spec"]["base"]["data"]
        # The placeholder path is gone: the service resolves the uploaded file to its own.
        assert data["task"] == "jsonl" and data["path"].endswith(f"/{data['file']}.jsonl")
        uploaded = client.json("GET", f"/v1/files/{data['file']}")
        rows = records.write_user_jsonl(tmp_path / "questions.jsonl", 400).read_bytes()
        assert uploaded["sha256"] == hashlib.sha256(rows).hexdigest(), uploaded
        assert [(x["arm"], x["kind"]) for x in study["runs"]] == [("ce", "tune")]


class Sweeps:
    """A stand-in for the REST client with one finished sweep: its spec and trials table."""

    def __init__(self, spec: dict[str, object], trials: list[dict[str, object]]):
        self.replies = {
            "/v1/tunes/tune-1": {"spec": spec},
            "/v1/tunes/tune-1/trials": {"items": trials},
        }

    def json(self, method: str, path: str) -> object:
        assert method == "GET"
        return self.replies[path]


def test_a_sweep_is_kept_as_its_best_trial(records: ModuleType, tmp_path: Path) -> None:
    """The record readme_pretrained reads: the best trial by the sweep's metric and mode
    (a trial without a score never wins), and a file name that says which sweep it was."""
    spec = StudySpec.model_validate(load_spec_file(BENCH / "studies" / "smollm2-units.yaml"))
    tune = spec.lr_sweep_spec().model_dump(mode="json")
    trials = [
        {"config": {"lr": 1e-5}, "best_metric": 0.31},
        {"config": {"lr": 9e-5}, "best_metric": 0.52},
        {"config": {"lr": 3e-4}, "best_metric": None},
        {"config": {"lr": 2e-4}, "best_metric": 0.47},
    ]
    run = {"arm": "ce", "kind": "tune", "job_id": "tune-1"}
    name, found = records.sweep_record(Sweeps(tune, trials), run, "smollm2")
    assert found["config"] == {"lr": 9e-5} and found["metrics"] == {"eval_exact_match": 0.52}
    records.keep(tmp_path, {}, {name: found})
    _, (kept,) = records.load_runs(tmp_path)
    assert (kept["sweep"], kept["task"], kept["config"]) == ("lr", "units", {"lr": 9e-5})
    tuned = {**run, "arm": "smmd-tuned"}
    name, _ = records.sweep_record(Sweeps(tune, trials), tuned, "smollm2")
    assert "-lr-" not in name and name.endswith(".json")
    with pytest.raises(ClientError, match="no trial with a score"):
        records.sweep_record(Sweeps(tune, [trials[2]]), run, "smollm2")
