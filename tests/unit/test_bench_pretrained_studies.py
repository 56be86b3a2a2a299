"""The pretrained study's cells are study specs (bench/studies/*.yaml): the service runs them
(`numtune study run`, `bench/study_records.py --spec`), and the runs kept from them are theirs.

- Each file says what bench/protocol.md says: arms, seeds, search space, budget, margin;
  and the service takes it (POST /v1/studies, Ray stubbed).
- Adoption: every kept run's spec is what its cell's StudySpec expands to for that arm and
  seed at its sweeps' chosen values, but for the fields that only name a run (`name`,
  `register_as`) and the path of the generated JSONL; its file name is the digest of its
  whole spec. Checked over every record in bench/results/pretrained-runs/.
"""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from bench import accuracy_studies
from bench.user_questions import write_user_jsonl
from jobs.spec import load_spec_file
from tests.support.api import auth, token_for
from tests.support.studies import app_on

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
RECORDS = BENCH / "results" / "pretrained-runs"


def test_the_study_specs_are_the_protocols_cells() -> None:
    for part in accuracy_studies.PRETRAINED_PARTS:
        study = accuracy_studies.load_study(part)
        assert study.name == part and study.base.model.source == "bundled:smollm2-135m"
        assert study.seeds == [0, 1, 2, 3, 4]  # the bench runs seeds range(5)
        assert (study.primary_metric, study.equivalence_margin) == ("exact_match", 0.05)
        assert study.tune_lr is not None
        assert (study.tune_lr.low, study.tune_lr.high, study.lr_samples) == (1e-5, 3e-4, 6)
        assert list(accuracy_studies.arms(study)) == ["ce", "emd", "smmd_tuned",
                                                            "del[weight=1]"]  # fmt: skip
        (tuned,) = study.tuned_arms
        space = {k: (d.kind, d.low, d.high) for k, d in tuned.search_space().items()}
        assert space == {"bandwidth": ("loguniform", 0.25, 16.0),
                         "weight": ("loguniform", 0.03, 3.0)}  # fmt: skip
        assert tuned.num_samples == 6 and study.arm("del").weight == 1.0  # type: ignore[union-attr]
        train = study.base.train
        assert (train.steps, train.batch_size, train.eval_every, study.base.data.eval_size) == (
            150, 8, 30, 150)  # fmt: skip
    assert accuracy_studies.PRETRAINED_ARMS == ("ce", "emd", "smmd_tuned", "del[weight=1]")


def test_the_service_takes_the_study_specs(tmp_path: Path) -> None:
    """`numtune study run bench/studies/<cell>.yaml` as the REST API takes it (Ray stubbed):
    ce's learning-rate sweep queued first, alone; the JSONL cell once its path names the
    questions inside the service's data roots."""
    questions = tmp_path / "data" / "questions.jsonl"
    write_user_jsonl(questions, 5000)
    with TestClient(app_on(tmp_path)) as client:
        ann = token_for(client, "ann", "submit")
        for part in ("smollm2-units", "smollm2-jsonl"):
            body = load_spec_file(BENCH / "studies" / f"{part}.yaml")
            if part.endswith("jsonl"):
                body["base"]["data"]["path"] = str(questions)  # type: ignore[index]
            r = client.post("/v1/studies", json=body, headers=auth(ann))
            assert r.status_code == 202, r.text
            assert [(x["arm"], x["kind"]) for x in r.json()["runs"]] == [("ce", "tune")]
            sweep = client.get(f"/v1/tunes/{r.json()['runs'][0]['job_id']}", headers=auth(ann))
            assert sweep.json()["spec"]["num_samples"] == 6, sweep.text
