"""Every run scored under each numeric decoding (jobs/infer/all_decodings.py,
jobs/train/decodings.py), and the decoding each arm of a study is judged by
(jobs/spec/study_decoding.py, service/studies/decoding.py).

A tiny random model from config with SmolLM2's real tokenizer; no Ray.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.data import load_task
from jobs.infer import NumericPredictor
from jobs.infer.all_decodings import decode_all, number_text, summarise
from jobs.infer.evaluate import generate_answers, question_records
from jobs.modeling.model import load_model_and_tokenizer
from jobs.records.models import DecodingScores, DecodingsRecord, RunResult
from jobs.records.run_files import RunFiles
from jobs.spec import DataSpec, JobSpec, ModelSpec, StudySpec
from jobs.train.decodings import final_decodings, settings_of
from jobs.train.evaluation import evaluate_sharded
from service.store import JobRow, StudyRow
from service.studies import result
from tests.support.api import auth, token_for
from tests.support.studies import app_on, body, upload

GREEDY = ["greedy", "number_first", "expected", "median"]


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    model, tokenizer = load_model_and_tokenizer(ModelSpec(source="random:tiny-digit"), seed=0)
    return model.eval(), tokenizer


def job(**train: Any) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "dec",
            "model": {"source": "random:tiny-digit", "use_chat_template": False},
            "data": {"train_size": 40, "eval_size": 6, "validation_size": 5},
            "train": {"eval_max_new_tokens": 5, "batch_size": 8, **train},
        }
    )


def test_one_batched_pass_gives_each_decoding_as_if_alone(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    spec = job()
    examples = load_task(spec.data).eval
    found = decode_all(model, tokenizer, examples, GREEDY, settings_of(spec), "arithmetic")
    # The rows of the four decodings interleave in one generate(); each is its own decoding.
    assert len({tuple(v) for v in found.answers.values()}) >= 3  # they differ: a real check
    alone: dict[str, Any] = {"max_new_tokens": 5, "batch_size": 8, "use_chat_template": False}
    assert found.answers["number_first"] == generate_answers(model, tokenizer, examples, **alone)
    plain = generate_answers(model, tokenizer, examples, number_first=False, **alone)
    assert found.answers["greedy"] == plain
    predictor = NumericPredictor(model, tokenizer, use_chat_template=False)
    prompts = [ex.prompt for ex in examples]
    for mode in ("expected", "median"):
        served = predictor.predict(prompts, max_new_tokens=5, decoding=mode, samples=0)
        assert [p.text for p in served] == found.answers[mode], mode
    assert found.seconds["greedy"] > 0 and found.seconds["sampled"] == 0


def test_sampled_decodings_summarise_the_k_numbers(tiny: tuple[Any, Any]) -> None:
    answers: dict[str, list[str]] = {"sample_mean": [], "sample_median": []}
    summarise(answers, ["3", "5", "no", "10", "x", "y", "z", "w"], 4, list(answers), "add")
    assert answers == {"sample_mean": ["6", ""], "sample_median": ["5", ""]}
    clock: dict[str, list[str]] = {"sample_median": []}
    summarise(clock, ["23:50", "00:20", "00:10"], 3, ["sample_median"], "clock")
    assert clock["sample_median"] == ["00:10"]  # on the circle, not 00:20's neighbour 23:50
    assert number_text(1e-7, None) == "0.0000001" and number_text(2.5, None) == "2.5"
    model, tokenizer = tiny
    spec = job(eval_samples=3)
    examples = load_task(spec.data).eval[:3]
    names = ["sample_mean", "sample_median"]
    once = decode_all(model, tokenizer, examples, names, settings_of(spec), "arithmetic")
    again = decode_all(model, tokenizer, examples, names, settings_of(spec), "arithmetic")
    assert once.answers == again.answers and len(once.answers["sample_median"]) == 3


def test_load_task_carves_validation_rows_out_of_training() -> None:
    data = DataSpec(train_size=40, eval_size=6)
    whole, carved = load_task(data), load_task(data.model_copy(update={"validation_size": 5}))
    assert carved.eval == whole.eval  # the test questions do not move
    sweep = load_task(data.model_copy(update={"eval_split": "validation", "eval_size": 5}))
    assert carved.validation == sweep.eval and carved.train == sweep.train  # the sweeps' rows
    assert not {ex.prompt for ex in carved.validation} & {ex.prompt for ex in carved.train}
    assert "validation_size" not in data.model_dump_json()  # default left out: digests hold
    with pytest.raises(ValueError, match="validation_size"):
        DataSpec(train_size=40, validation_size=40)


def test_the_final_evaluation_records_each_decoding(tiny: tuple[Any, Any], tmp_path: Path) -> None:
    model, tokenizer = tiny
    spec = job(eval_decodings=["number_first", "expected", "sample_median"], eval_samples=3)
    task = load_task(spec.data)
    scores, primary = evaluate_sharded(model, tokenizer, task.eval, spec, 0, 1)
    files = RunFiles.for_job("run-1", str(tmp_path))
    files.write_predictions(primary)
    record = final_decodings(model, tokenizer, task.eval, spec, (primary, scores), files)
    assert list(record.scores) == ["number_first", "expected", "sample_median"]
    assert record.primary == "number_first" and record.validation_rows == 5
    kept_record = files.read_decodings()  # NaN metrics (nothing parsed): compared as null
    assert kept_record is not None
    assert json.loads(kept_record.model_dump_json()) == json.loads(record.model_dump_json())
    first = record.scores["number_first"]
    assert first.predictions == "predictions.jsonl"  # the primary answers, reused
    assert first.metrics["exact_match"] == scores["eval_exact_match"]
    for name, scored in record.scores.items():
        kept = files.read_predictions(scored.predictions) or []
        assert [q.prompt for q in kept] == [ex.prompt for ex in task.eval], name
        held = files.read_predictions(scored.validation_predictions or "") or []
        assert [q.prompt for q in held] == [ex.prompt for ex in task.validation], name
        assert scored.validation is not None and "mae" in scored.validation
    expected = files.read_predictions("predictions-expected.jsonl") or []
    again = decode_all(model, tokenizer, task.eval, ["expected"], settings_of(spec), "arithmetic")
    assert [q.prediction for q in expected] == again.answers["expected"]
    # The run's outcome under a decoding: its answers and metrics; none it did not score.
    files.write_result(RunResult(status="succeeded", metrics=scores | {"eval_loss": 1.5}))
    outcome = files.read_outcome(0, "run-1", "expected")
    assert outcome is not None and outcome.questions == expected
    assert outcome.metrics["exact_match"] == record.scores["expected"].metrics["exact_match"]
    assert outcome.metrics["loss"] == 1.5  # what a decoding does not change is kept
    assert files.read_outcome(0, "run-1", "greedy") is None
    assert files.read_outcome(0, "run-1") == files.read_outcome(0, "run-1", "number_first")


# ---- studies -----------------------------------------------------------------------------

BASE = {
    "name": "b",
    "model": {"source": "random:tiny-digit"},
    "data": {"task": "add", "train_size": 100, "eval_size": 4},
}


def study_spec(**fields: Any) -> StudySpec:
    return StudySpec.model_validate(
        {"name": "s", "base": BASE, "arms": [{"name": "emd"}], "seeds": [0, 1], **fields}
    )


def test_a_study_declares_decodings_and_its_runs_score_them() -> None:
    plain = study_spec().run_spec("ce", study_spec().base.loss, 0)
    dumped = plain.model_dump_json()
    assert "eval_decodings" not in dumped and "validation_size" not in dumped  # digests hold
    spec = study_spec(decoding="best_on_validation", arm_decodings={"ce": "sample_median"})
    run = spec.run_spec("emd", spec.base.loss, 1)
    assert run.train.eval_decodings == ("expected", "median", "sample_median")
    assert run.data.validation_size == 4  # the sweeps' validation rows (eval_size here)
    sized = study_spec(decoding="best_on_validation", sweeps={"validation_size": 10})
    assert sized.run_spec("ce", sized.base.loss, 0).data.validation_size == 10
    with pytest.raises(ValueError, match=r"arm_decodings: \['mmd'\] name no arm"):
        study_spec(arm_decodings={"mmd": "greedy"})
    with pytest.raises(ValueError, match="decoding: best_on_validation"):
        study_spec(decoding="best_on_validation", sweeps={"validation_size": 100})


# Per decoding: (validation exact match, test exact match). On validation `expected` is the
# best for every arm; on the test rows `median` is: a choice that looked at them would differ.
SCORES = {"number_first": (0.2, 0.3), "expected": (0.6, 0.1), "median": (0.4, 0.9)}
TARGETS = ["3", "5", "8", "13"]


def write_run(storage: Path, job_id: str, seed: int, shift: float) -> None:
    files = RunFiles.for_job(job_id, str(storage))
    scores = {}
    for name, (val, test) in SCORES.items():
        # Questions answered right as the test exact match says (the bootstrap reads them).
        right = round(test * len(TARGETS))
        preds = TARGETS[:right] + ["0"] * (len(TARGETS) - right)
        file = "predictions.jsonl" if name == "number_first" else f"predictions-{name}.jsonl"
        files.write_predictions(question_records(preds, TARGETS, "add"), file)
        metrics = {"exact_match": test + shift * seed, "mae": 1.0}
        scores[name] = DecodingScores(metrics=metrics, predictions=file, validation={
            "exact_match": val + shift, "mae": 1.0
        })  # fmt: skip
    files.write_decodings(DecodingsRecord(
        primary="number_first", samples=16, validation_rows=4, scores=scores, seconds={}
    ))  # fmt: skip
    first = {f"eval_{k}": v for k, v in scores["number_first"].metrics.items()}
    files.write_result(RunResult(status="succeeded", metrics=first))


def finished(spec: StudySpec, storage: Path) -> tuple[StudyRow, dict[str, JobRow]]:
    runs, jobs = [], {}
    for arm, shift in (("ce", 0.0), ("emd", 0.01)):
        for seed in spec.seeds:
            job_id = f"{arm}-{seed}"
            write_run(storage, job_id, seed, shift)
            loss = spec.base.loss.model_copy(update={"name": arm})
            run = spec.run_spec(arm, loss, seed).model_dump(mode="json")
            jobs[job_id] = JobRow(id=job_id, kind="job", status="succeeded", spec_json=run)
            runs.append({"job_id": job_id, "kind": "job", "arm": arm, "seed": seed})
    row = StudyRow(id="study-1", name="s", runs=runs, spec_json=spec.model_dump(mode="json"))
    return row, jobs


def test_best_on_validation_chooses_on_validation_rows_alone(tmp_path: Path) -> None:
    spec = study_spec(decoding="best_on_validation")
    built = result.build(spec, *finished(spec, tmp_path), str(tmp_path))
    chosen = built["decodings"]
    assert chosen["ce"]["decoding"] == chosen["emd"]["decoding"] == "expected"
    assert chosen["emd"]["metric"] == "exact_match" and chosen["emd"]["runs"] == 2
    assert chosen["emd"]["validation"]["median"] == pytest.approx(0.41)
    arms = {a["arm"]: a for a in built["comparison"]["arms"]}
    assert {a: arms[a]["decoding"] for a in arms} == {"ce": "expected", "emd": "expected"}
    # The arms are compared on the chosen decoding's test answers and metrics.
    assert arms["ce"]["mean"]["exact_match"] == pytest.approx(0.1)
    records = {r["job_id"]: r for r in built["runs"]}
    assert [q["prediction"] for q in records["emd-0"]["predictions"]] == ["0", "0", "0", "0"]
    json.dumps(built)  # the stored result is plain JSON


def test_each_arm_names_its_declared_decoding(tmp_path: Path) -> None:
    spec = study_spec(decoding="median", arm_decodings={"ce": "number_first"})
    built = result.build(spec, *finished(spec, tmp_path), str(tmp_path))
    arms = {a["arm"]: a for a in built["comparison"]["arms"]}
    assert arms["ce"]["decoding"] == "number_first" and arms["emd"]["decoding"] == "median"
    assert built["decodings"]["emd"] == {
        "decoding": "median", "declared": "median", "metric": None, "validation": {},
        "runs": 0, "note": None,
    }  # fmt: skip
    assert arms["emd"]["mean"]["exact_match"] == pytest.approx(0.905)  # median's, seeds 0, 1
    # A study that declares none reads each run as before: its own decoding, named.
    plain = study_spec()
    built = result.build(plain, *finished(plain, tmp_path / "plain"), str(tmp_path / "plain"))
    assert {a["decoding"] for a in built["comparison"]["arms"]} == {"number_first"}
    assert built["decodings"]["ce"]["declared"] is None


def test_over_rest_a_study_queues_runs_that_hold_validation_rows_out(tmp_path: Path) -> None:
    with TestClient(app_on(tmp_path)) as client:
        ann = token_for(client, "ann", "submit")
        file_id = upload(client, ann)
        bad = body(file_id, arm_decodings={"emd": "median"})  # the arm is smmd
        r = client.post("/v1/studies", json=bad, headers=auth(ann))
        assert r.status_code == 422 and "arm_decodings" in r.text, r.text
        assert client.get("/v1/jobs", headers=auth(ann)).json()["items"] == []
        good = body(file_id, decoding="best_on_validation", arm_decodings={"ce": "greedy"})
        r = client.post("/v1/studies", json=good, headers=auth(ann))
        assert r.status_code == 202, r.text
        assert r.json()["spec"]["decoding"] == "best_on_validation"
        jobs = client.get("/v1/jobs", headers=auth(ann)).json()["items"]
        assert len(jobs) == 6 and {j["spec"]["data"]["validation_size"] for j in jobs} == {4}
        scored = {tuple(j["spec"]["train"]["eval_decodings"]) for j in jobs}
        assert scored == {("greedy", "expected", "median")}
