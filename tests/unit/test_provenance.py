"""jobs/records/provenance.py and the files it describes: the commit (or "unknown", never a
failure), data hashes, decoding, and predictions.jsonl / result.json read back typed."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from jobs.records import provenance as prov
from jobs.records.models import PREDICTIONS, QuestionRecord, RunResult
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec


def jsonl_spec(path: Path, **train: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "p",
            "model": {"source": "random:tiny-char", "use_chat_template": False},
            "data": {"task": "jsonl", "path": str(path)},
            "train": {"steps": 1, **train},
        }
    )


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_commit_of_a_checkout_and_unknown_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NUMTUNE_COMMIT", raising=False)
    commit = prov.git_commit.__wrapped__  # uncached
    repo = tmp_path / "repo"
    (repo / "jobs").mkdir(parents=True)
    (repo / "jobs" / "a.py").write_text("x = 1\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = git(repo, "rev-parse", "HEAD")
    assert commit(repo) == head
    (repo / "jobs" / "a.py").write_text("x = 2\n")
    assert commit(repo) == head + "+dirty"
    # A folder inside some other repository (a wheel in a project's venv) is not numtune's.
    assert commit(repo / "jobs") == "unknown"
    assert commit(tmp_path / "nowhere") == "unknown"  # not even a folder: still no failure
    # By default: the checkout that holds this jobs/ package (the tests run in one).
    here = git(Path(prov.__file__).parent, "rev-parse", "HEAD")
    assert commit().removesuffix("+dirty") == here
    monkeypatch.setenv("NUMTUNE_COMMIT", "abc123")
    assert commit(tmp_path) == "abc123"


def test_provenance_of_a_jsonl_spec(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text('{"prompt": "1+1=", "answer": "2"}\n')
    spec = jsonl_spec(data, eval_decoding="greedy", eval_max_new_tokens=7)
    out = prov.provenance(spec)
    assert out.spec == spec
    assert out.data_sha256 == {str(data): hashlib.sha256(data.read_bytes()).hexdigest()}
    assert out.decoding.model_dump() == {
        "strategy": "greedy", "number_first": False, "max_new_tokens": 7,
        "use_chat_template": False,
    }  # fmt: skip
    assert out.numtune_version == "0.1.0"
    assert out.git_commit  # a commit here, "unknown" in an installed copy: never empty
    data.unlink()  # a file gone is said, not raised
    assert prov.provenance(spec).data_sha256[str(data)].startswith("unknown (FileNotFoundError")


def test_predictions_and_result_read_back_typed(tmp_path: Path) -> None:
    files = RunFiles.for_job("run-1", str(tmp_path))
    assert files.read_predictions() is None and not files.has(PREDICTIONS)
    records = [
        QuestionRecord(prompt="1+1=", target="2", prediction="2", value=2.0, target_value=2.0,
                       correct=True, abs_error=0.0, digit_accuracy=1.0),
        QuestionRecord(target="x", prediction="y", value=None, target_value=None,
                       correct=False, abs_error=None),
    ]  # fmt: skip
    files.write_predictions(records)
    assert files.read_predictions() == records
    assert len((tmp_path / "runs" / "run-1" / PREDICTIONS).read_text().splitlines()) == 2
    data = tmp_path / "rows.jsonl"
    data.write_text('{"prompt": "1+1=", "answer": "2"}\n')
    origin = prov.provenance(jsonl_spec(data)).model_copy(update={"predictions": PREDICTIONS})
    files.write_result(RunResult(status="succeeded", metrics={"eval_mae": 0.5}, provenance=origin))
    back = files.read_result(RunResult)
    assert back is not None and back.provenance == origin
    # Results from before provenance existed still read.
    (tmp_path / "runs" / "run-1" / "result.json").write_text(json.dumps({"status": "failed"}))
    old = files.read_result(RunResult)
    assert old is not None and old.provenance is None


def test_a_finished_run_reads_as_a_stats_outcome(tmp_path: Path) -> None:
    files = RunFiles.for_job("run-2", str(tmp_path))
    assert files.read_outcome(seed=3) is None  # not finished
    record = QuestionRecord(target="2", prediction="3", value=3.0, target_value=2.0,
                            correct=False, abs_error=1.0)  # fmt: skip
    files.write_predictions([record])
    metrics = {"eval_exact_match": 0.25, "eval_mae": float("nan"), "loss": 0.5, "step": 10}
    files.write_result(RunResult(status="succeeded", metrics=metrics))
    outcome = files.read_outcome(seed=3, run_id="run-2")
    assert outcome is not None
    assert (outcome.seed, outcome.run_id, outcome.questions) == (3, "run-2", [record])
    assert outcome.metrics == {"exact_match": 0.25, "mae": None}
    files.write_result(RunResult.failed("oom", "out of memory"))
    assert files.read_outcome(seed=3) is None
