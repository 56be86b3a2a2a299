"""The pretrained study's cells are study specs (bench/studies/*.yaml): the service runs them
(`numtune study run`), and `bench/accuracy.py --scale pretrained` builds its runs from them.

- Each file says what bench/protocol.md says: arms, seeds, search space, budget, margin;
  and the service takes it (POST /v1/studies, Ray stubbed).
- The bench's planned runs did not move when it began building them from the study specs:
  their job ids (the kept records' file names) and specs, and the sweeps' digests (their
  records' names), are those computed on the code before (pinned here). One of those
  digests, 60fb0d80, is the ce learning-rate sweep of `units` that the running study kept.
- Adoption: every kept run's spec is what its cell's StudySpec expands to for that arm and
  seed at its sweeps' chosen values, but for the fields that only name a run (`name`,
  `register_as`) and the path of the generated JSONL. Checked over every record in
  bench/results/pretrained-runs/ (as many as the study has written), and over records the
  current code writes for a synthetic study.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from rich.console import Console

from jobs.spec import JobSpec, TunedArm, TuneSpec, load_spec_file
from tests.support.api import auth, token_for
from tests.support.studies import app_on

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
RECORDS = BENCH / "results" / "pretrained-runs"
# The study's storage on the machine that runs it: the JSONL cell's data path (and so its
# runs' digests) and the sweeps' validation files are under it. Nothing is written there.
STUDY_STORAGE = Path("/root/.numtune/bench/accuracy-pretrained")
TRAIN_ROWS = {"units": 8000, "jsonl": 4850, "listsum": 50000, "add": 8000}  # minus the tests
CHOSEN = {"lr": 9.234876003528051e-05, "bandwidth": 2.5, "weight": 0.4}


@pytest.fixture(scope="module")
def bench() -> Iterator[SimpleNamespace]:
    sys.path.insert(0, str(BENCH))
    try:
        names = (
            "accuracy",
            "accuracy_plan",
            "accuracy_runs",
            "accuracy_studies",
            "accuracy_sweeps",
        )
        modules: dict[str, ModuleType] = {n: importlib.import_module(n) for n in names}
        modules["pre"] = importlib.import_module("readme_pretrained")
        yield SimpleNamespace(**modules)
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture
def no_sweeps(bench: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sweeps that choose CHOSEN at once, and validation splits that write no file."""

    def split(spec: JobSpec, folder: Path, val: int) -> tuple[Path, Path, int]:
        return (
            folder / "tune-train.jsonl",
            folder / "tune-val.jsonl",
            TRAIN_ROWS[spec.data.task] - val,
        )

    def tune(spec: TuneSpec, name: str, storage: str) -> SimpleNamespace:
        config = {k: v for k, v in CHOSEN.items() if k in spec.space}
        metrics = {"eval_exact_match": 0.5}
        return SimpleNamespace(status="succeeded", best_config=config, trials=6, metrics=metrics)

    monkeypatch.setattr(bench.accuracy_sweeps, "write_validation_split", split)
    monkeypatch.setattr(bench.accuracy_sweeps, "run_tune", tune)


def planned(
    bench: SimpleNamespace, storage: Path, records: Path, *argv: str
) -> tuple[list[Any], dict[str, Any]]:
    """The bench's plan (its runs, its sweeps' results), its sweeps kept in `records`."""
    argv = ("--scale", "pretrained", "--records", str(records), *argv)
    args = bench.accuracy.parse_args(list(argv))
    plan = bench.accuracy_plan.Plan(args, storage)
    todo, tuned = bench.accuracy.plan_runs(plan, Console(quiet=True))
    return todo, tuned


def test_the_study_specs_are_the_protocols_cells(bench: SimpleNamespace) -> None:
    for part in bench.accuracy_plan.PRETRAINED_PARTS:
        study = bench.accuracy_studies.load_study(part)
        assert study.name == part and study.base.model.source == "bundled:smollm2-135m"
        assert study.seeds == [0, 1, 2, 3, 4]  # the bench runs seeds range(5)
        assert (study.primary_metric, study.equivalence_margin) == ("exact_match", 0.05)
        assert study.tune_lr is not None
        assert (study.tune_lr.low, study.tune_lr.high, study.lr_samples) == (1e-5, 3e-4, 6)
        assert list(bench.accuracy_studies.arms(study)) == ["ce", "emd", "smmd_tuned",
                                                            "del[weight=1]"]  # fmt: skip
        (tuned,) = study.tuned_arms
        space = {k: (d.kind, d.low, d.high) for k, d in tuned.search_space().items()}
        assert space == {"bandwidth": ("loguniform", 0.25, 16.0),
                         "weight": ("loguniform", 0.03, 3.0)}  # fmt: skip
        assert tuned.num_samples == 6 and study.arm("del").weight == 1.0  # type: ignore[union-attr]
        train = study.base.train
        assert (train.steps, train.batch_size, train.eval_every, study.base.data.eval_size) == (
            150, 8, 30, 150)  # fmt: skip
    assert bench.accuracy_plan.PRETRAINED_ARMS == ("ce", "emd", "smmd_tuned", "del[weight=1]")


@pytest.mark.usefixtures("no_sweeps")
def test_the_bench_sweeps_as_the_study_specs_sweeps_say(
    bench: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each file's `sweeps` is the protocol's (seed 1000, 300 validation rows, Optuna, ASHA
    at a quarter of the steps), and every sweep the bench plans runs with exactly that."""
    seen: list[TuneSpec] = []
    chosen = bench.accuracy_sweeps.run_tune  # no_sweeps' stand-in: chooses CHOSEN at once

    def tune(spec: TuneSpec, name: str, storage: str) -> SimpleNamespace:
        seen.append(spec)
        return chosen(spec, name, storage)  # type: ignore[no-any-return]

    monkeypatch.setattr(bench.accuracy_sweeps, "run_tune", tune)
    planned(bench, tmp_path / "storage", tmp_path / "records", "--part", "all")
    # A sweep's training rows are written under tune-data/<part>/ (write_validation_split).
    by_part: dict[str, list[TuneSpec]] = {}
    for spec in seen:
        by_part.setdefault(Path(str(spec.base.data.path)).parent.name, []).append(spec)
    assert sorted(by_part) == sorted(bench.accuracy_plan.PRETRAINED_PARTS)
    for part, specs in by_part.items():
        sweeps = bench.accuracy_studies.load_study(part).sweeps
        assert (sweeps.seed, sweeps.validation_size, sweeps.search) == (1000, 300, "optuna")
        assert len(specs) == 2  # ce's learning rate, then smmd's bandwidth and weight
        for spec in specs:
            assert (spec.base.train.seed, spec.search, spec.asha) == (
                sweeps.seed, sweeps.search, sweeps.asha)  # fmt: skip
            assert spec.base.data.eval_size == sweeps.validation_size


# Computed on the bench's code before it read the study specs (commit 14a0316), with the
# sweeps choosing CHOSEN: every planned run's job id and the sha256 of its whole spec.
SWEEP_DIGESTS = {
    "smollm2/units": "e5a25c52", "smollm2/jsonl": "851d6fcf", "smollm2/listsum": "3cf945af",
    "smollm2/add": "d4a694ef", "smollm2/units lr": "60fb0d80", "smollm2/jsonl lr": "04d40e2e",
    "smollm2/listsum lr": "1460881a", "smollm2/add lr": "6d26d72e",
}  # fmt: skip
SEED_0 = {
    "smollm2-units-ce-s0-b21fc0eb": "62cc13c1fb44729a",
    "smollm2-units-emd-s0-f7594ccc": "245617707a02167d",
    "smollm2-units-smmd_tuned-s0-d39029b1": "83a4454e857f915c",
    "smollm2-units-del_weight-1-s0-86b08377": "633b2f7cfcdb42aa",
    "smollm2-jsonl-ce-s0-3d0639b8": "e41bf069cfa0054a",
    "smollm2-jsonl-emd-s0-a4d79ac6": "aa907b56bd3527be",
    "smollm2-jsonl-smmd_tuned-s0-5222b7e6": "e0edc0bd48c51cb6",
    "smollm2-jsonl-del_weight-1-s0-23bc5acc": "a7f57f1844c84d72",
}
ALL_RUNS = "2581ed21461889974f6ba2ab5df04256237a6b5f7b4c0de9deb7db09747b0492"  # 80 runs


@pytest.mark.usefixtures("no_sweeps")
def test_the_planned_runs_and_sweeps_are_unchanged(bench: SimpleNamespace, tmp_path: Path) -> None:
    todo, tuned = planned(bench, STUDY_STORAGE, tmp_path, "--part", "all")
    assert {cell: found["digest"] for cell, found in tuned.items()} == SWEEP_DIGESTS
    # Fields the spec grew after these runs were planned, at their defaults, change no run.
    later = bench.accuracy_sweeps.later_at_default
    runs = {t.job_id: hashlib.sha256(t.spec.model_dump_json(exclude=later(t.spec)).encode())
            .hexdigest()[:16] for t in todo}  # fmt: skip
    assert {k: v for k, v in runs.items() if k in SEED_0} == SEED_0
    assert len(runs) == 80
    assert hashlib.sha256(json.dumps(sorted(runs.items())).encode()).hexdigest() == ALL_RUNS


def adopted(bench: SimpleNamespace, folder: Path) -> int:
    """Check every run record in `folder` against its cell's StudySpec; how many there are."""
    runs, sweeps = bench.pre.load_runs(folder)
    chosen: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for found in sweeps:
        chosen.setdefault((found["task"], found["sweep"]), []).append(found["config"])
    for record in runs:
        study = bench.accuracy_studies.load_study(record["part"])
        task = study.base.data.task
        assert record["task"] == task and record["model"] == "smollm2"
        label, arm = bench.accuracy_studies.arms(study)[record["loss"]]
        (lr,) = chosen[task, "lr"]  # one learning-rate sweep per task, kept beside its runs
        loss = arm
        if isinstance(arm, TunedArm):
            (best,) = chosen[task, "smmd"]
            loss = study.tuned_loss(arm, best)
        # Both without the fields the spec grew since the kept runs (at their defaults).
        later = bench.accuracy_sweeps.later_at_default
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
        digest = bench.accuracy_sweeps.run_digest(JobSpec.model_validate(record["spec"]))
        name = bench.accuracy.run_id("smollm2", task, record["loss"], record["seed"], digest)
        assert record["job_id"] == name and (folder / f"{name}.json").is_file()
    return len(runs)


def test_every_kept_run_is_its_study_specs_run(bench: SimpleNamespace) -> None:
    # The committed study: 2 cells × 4 arms × 5 seeds. No records would check nothing.
    assert adopted(bench, RECORDS) >= 40


@pytest.mark.usefixtures("no_sweeps")
def test_runs_the_bench_writes_now_are_adopted(bench: SimpleNamespace, tmp_path: Path) -> None:
    storage, records = tmp_path / "storage", tmp_path / "records"
    bench.accuracy_runs.write_user_jsonl(storage / "user-data" / "questions.jsonl", 5000)
    parts = "smollm2-units,smollm2-jsonl"
    todo, _ = planned(bench, storage, records, "--part", parts, "--seeds", "2")
    assert len(list(records.glob("sweep-*.json"))) == 4  # the sweeps, kept as they ran
    for item in todo:  # each run's record, as the bench keeps it once the run has finished
        out = {"metrics": {"interpolate": {"exact_match": 0.5}}, "commit": "abc"}
        record = bench.accuracy.kept_record(item, out)
        (records / f"{item.job_id}.json").write_text(json.dumps(record))
    assert adopted(bench, records) == len(todo) == 16  # 2 cells × 4 arms × 2 seeds


def test_the_service_takes_the_study_specs(bench: SimpleNamespace, tmp_path: Path) -> None:
    """`numtune study run bench/studies/<cell>.yaml` as the REST API takes it (Ray stubbed):
    ce's learning-rate sweep queued first, alone; the JSONL cell once its path names the
    questions inside the service's data roots."""
    questions = tmp_path / "data" / "questions.jsonl"
    bench.accuracy_runs.write_user_jsonl(questions, 5000)
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
