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
from typing import Any

from fastapi.testclient import TestClient

from bench import accuracy_records, accuracy_studies, readme_pretrained
from bench.user_questions import write_user_jsonl
from jobs.spec import JobSpec, TunedArm, load_spec_file
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


def adopted(folder: Path) -> int:
    """Check every run record in `folder` against its cell's StudySpec; how many there are."""
    runs, sweeps = readme_pretrained.load_runs(folder)
    chosen: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for found in sweeps:
        chosen.setdefault((found["task"], found["sweep"]), []).append(found["config"])
    for record in runs:
        study = accuracy_studies.load_study(record["part"])
        task = study.base.data.task
        assert record["task"] == task and record["model"] == "smollm2"
        label, arm = accuracy_studies.arms(study)[record["loss"]]
        (lr,) = chosen[task, "lr"]  # one learning-rate sweep per task, kept beside its runs
        loss = arm
        if isinstance(arm, TunedArm):
            (best,) = chosen[task, "smmd"]
            loss = study.tuned_loss(arm, best)
        # Both without the fields the spec grew since the kept runs (at their defaults).
        later = accuracy_records.later_at_default
        run = study.run_spec(label, loss, record["seed"], lr["lr"])
        expected = run.model_dump(mode="json", exclude=later(run))
        as_kept = JobSpec.model_validate(record["spec"])
        kept = as_kept.model_dump(mode="json", exclude=later(as_kept))
        for spec in (expected, kept):  # what only names a run, and the generated file's path
            del spec["name"], spec["register_as"]
            if task == "jsonl":
                assert Path(spec["data"].pop("path")).name == "questions.jsonl"
        assert kept == expected, record["job_id"]
        # Its file name is still the bench's name for it: the digest of its whole spec.
        digest = accuracy_records.run_digest(JobSpec.model_validate(record["spec"]))
        name = accuracy_records.run_id("smollm2", task, record["loss"], record["seed"], digest)
        assert record["job_id"] == name and (folder / f"{name}.json").is_file()
    return len(runs)


def test_every_kept_run_is_its_study_specs_run() -> None:
    assert adopted(RECORDS) == 40  # the first protocol's kept runs: 2 cells x 4 arms x 5 seeds


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
