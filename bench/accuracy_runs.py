"""One benchmark run, through numtune's own job path, and the user-style JSONL task.

`run_one` is what a Ray task executes: `jobs.train.runner.build_trainer(..., in_process=True)`,
i.e. Ray Train's local mode running the very `train_loop_per_worker` the service runs,
in this (Ray worker) process. Local mode skips the 15-25 s start-up of a worker group,
which would cost more than many of these short runs train; but it keeps only the last
reported metrics and hands back a checkpoint whose folder the loop has already deleted.
So while the loop runs, `ray.train.report` is wrapped to keep every report (the learning
curve) and copy the final checkpoint to storage (what a real Ray Train run does itself);
the extra held-out splits (the extrapolate set; `split@greedy`, a split decoded with plain
greedy) are then scored on those weights.

This module imports only jobs/ray/torch and the standard library: Ray workers import it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import ray.train

from jobs.calibration.held_out import calibrate_checkpoint
from jobs.calibration.per_arm import interval_metrics
from jobs.calibration.record import CALIBRATION_FILE, read_record
from jobs.data import load_task
from jobs.infer.evaluate import answers_for_spec, question_records, score_records
from jobs.modeling.model import load_checkpoint_model, load_tokenizer_for
from jobs.records.models import QuestionRecord
from jobs.records.provenance import decoding_of, git_commit
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec
from jobs.train.runner import build_trainer

FINAL = "final-checkpoint"
log = logging.getLogger(__name__)


CURVE = ("exact_match", "mae", "within_5pct", "digit_accuracy", "parse_failure_rate")


@contextlib.contextmanager
def keep_final_checkpoint(target: Path, reports: list[dict[str, Any]]) -> Iterator[None]:
    """While active, every report is appended to `reports` and every checkpoint reported is
    copied to `target` (the last one wins)."""
    original = ray.train.report

    def report(metrics: dict[str, Any], checkpoint: Any = None, **kwargs: Any) -> None:
        reports.append(dict(metrics))
        if checkpoint is not None:
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(checkpoint.path, target)
        original(metrics, checkpoint=checkpoint, **kwargs)

    ray.train.report = report
    try:
        yield
    finally:
        ray.train.report = original


def run_one(
    spec_json: str, job_id: str, storage: str, extra_splits: list[str], calibrate: bool = False
) -> dict[str, Any]:
    """Train one spec to its last step; return its held-out scores, curve and timing.

    Scores come from the last step (never from a checkpoint picked on the test split).
    `metrics[split]` holds every score of `jobs.infer.evaluate.score`; `predictions[split]` and
    `targets[split]` the answers behind them (the run folder keeps them judged, one
    predictions*.jsonl per split); `curve` the held-out scores at each evaluation;
    `step_time_s` the mean training step (evaluation excluded); `commit` and `decoding[split]`
    what produced them. With `calibrate`, the final weights get the end-of-job calibration a
    version gets (`spec.calibration`), and the eval split's metrics its 90 % interval's
    out-of-sample coverage, relative width and score (jobs/calibration/per_arm.py).
    """
    spec = JobSpec.model_validate_json(spec_json)
    files = RunFiles.for_job(job_id, storage)
    files.write_text("spec.json", spec.model_dump_json(indent=2))
    kept = Path(storage, "runs", job_id, FINAL)
    reports: list[dict[str, Any]] = []
    started = time.perf_counter()
    with keep_final_checkpoint(kept, reports):
        fit = build_trainer(spec, files, name="train", in_process=True).fit()
    wall = time.perf_counter() - started
    if fit.error is not None:
        raise RuntimeError(f"job {job_id} failed: {fit.error}")
    last = reports[-1] if reports else {}
    if last.get("step") != spec.train.steps or "eval_exact_match" not in last:
        raise RuntimeError(f"job {job_id}: the last report is not the final evaluation: {last}")
    keys = [k.removeprefix("eval_") for k in last if k.startswith("eval_") and "loss" not in k]
    metrics = {spec.data.eval_split: {k: float(last[f"eval_{k}"]) for k in keys if k != "ce"}}
    # The final evaluation's answers, as the train loop wrote them (predictions.jsonl).
    answers = {spec.data.eval_split: files.read_predictions() or []}
    decodings = {spec.data.eval_split: decoding_of(spec)}
    if extra_splits:
        model = load_checkpoint_model(kept)
        model.eval()
        tokenizer = load_tokenizer_for(spec.model)
        for name in extra_splits:
            # "split" or "split@decoding": the same weights scored with another decoding.
            split, _, decoding = name.partition("@")
            held = load_task(spec.data.model_copy(update={"eval_split": split})).eval
            scored = spec
            if decoding:
                train = spec.train.model_copy(update={"eval_decoding": decoding})
                scored = spec.model_copy(update={"train": train})
            preds = answers_for_spec(model, tokenizer, held, scored)
            targets, prompts = [ex.answer for ex in held], [ex.prompt for ex in held]
            answers[name] = question_records(preds, targets, spec.data.task, prompts)
            files.write_predictions(answers[name], f"predictions-{name}.jsonl")
            metrics[name] = score_records(answers[name])
            decodings[name] = decoding_of(scored)
    if calibrate and spec.calibration.questions:
        metrics[spec.data.eval_split].update(calibrated_interval(spec, kept))
    shutil.rmtree(kept, ignore_errors=True)  # weights are not part of the result
    logged = [json.loads(line) for line in (files.read_text("metrics.jsonl") or "").splitlines()]
    timed = [r["step_time_s"] for r in logged if "step_time_s" in r]
    out = {
        "metrics": metrics,
        "curve": [
            {"step": r["step"], **{k: float(r[f"eval_{k}"]) for k in CURVE}}
            for r in reports
            if "eval_exact_match" in r
        ],
        "step_time_s": sum(timed) / len(timed),
        "wall_s": wall,
        "final_loss": float(last["loss"]),
        "final_ce": float(last["ce"]),
        "commit": git_commit(),
        "decoding": {split: d.model_dump() for split, d in decodings.items()},
        **answer_columns(answers),
    }
    files.write_json("bench-result.json", out)
    return out


def calibrated_interval(spec: JobSpec, kept: Path) -> dict[str, Any]:
    """Calibrate the weights in `kept` as a job's end does (held-out questions, K samples,
    split conformal measured by cross-conformal folds); its 90 % interval's figures, or {}
    with a warning when there is none (too few questions to fit one, or a failed
    calibration): the run's other figures stand, and the arm's summary counts its runs."""
    if not calibrate_checkpoint(spec, pafs.LocalFileSystem(), str(kept)):
        log.warning("%s: not calibrated (the warning above says why)", spec.name)
        return {}
    raw = json.loads((kept / CALIBRATION_FILE).read_text())
    measured = interval_metrics(read_record(raw))
    if not measured:
        log.warning("%s: no calibrated 90 %% interval from %s questions", spec.name, raw["n"])
    return measured


def answer_columns(answers: dict[str, list[QuestionRecord]]) -> dict[str, Any]:
    """Per split the answers and targets as two lists of text: all a report needs to judge
    them again (jobs.infer.evaluate.question_records), at a tenth of the records' size."""
    return {
        "predictions": {split: [r.prediction for r in recs] for split, recs in answers.items()},
        "targets": {split: [r.target for r in recs] for split, recs in answers.items()},
    }


# ---- the user-style task ---------------------------------------------------------------

ITEMS = [("apples", "bag"), ("pencils", "box"), ("eggs", "carton"), ("stamps", "album")]


def user_question(rng: random.Random) -> dict[str, Any]:
    """One question the way a user's own data might look: a sentence and a number."""
    thing, holder = rng.choice(ITEMS)
    kind = rng.randrange(3)
    if kind == 0:
        a, b = rng.randrange(10, 500), rng.randrange(10, 500)
        return {"prompt": f"Ana has {a} {thing} and gets {b} more. How many now?", "answer": a + b}
    if kind == 1:
        a = rng.randrange(100, 999)
        b = rng.randrange(1, a)
        return {
            "prompt": f"Ben had {a} {thing} and gave away {b}. How many are left?",
            "answer": a - b,
        }
    a, b = rng.randrange(2, 13), rng.randrange(2, 40)
    return {
        "prompt": f"Each {holder} holds {b} {thing}. How many in {a} {holder}s?",
        "answer": a * b,
    }


def write_user_jsonl(path: Path, rows: int, seed: int = 0) -> Path:
    """Write `rows` generated questions as JSONL, one {"prompt", "answer"} object a line."""
    rng = random.Random(f"user-jsonl/{seed}")
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(user_question(rng)) for _ in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class StudyError(Exception):
    """A study that cannot run as asked; the message names the flag to change."""


def write_validation_split(spec: JobSpec, folder: Path, val_size: int) -> tuple[Path, Path, int]:
    """The arithmetic training set split into train/validation JSONL files for tuning.

    The sweep never sees the test split: it trains on the training rows minus the last
    `val_size` and is scored on those held-back training rows. Returns (train, val, n_train).
    """
    train = load_task(spec.data).train
    if len(train) - val_size < spec.train.batch_size:
        raise StudyError(
            f"--tune-val-size {val_size} leaves {len(train) - val_size} of {len(train)} training"
            f" rows, fewer than a batch of {spec.train.batch_size}: raise --train-size"
        )
    folder.mkdir(parents=True, exist_ok=True)
    paths = (folder / "tune-train.jsonl", folder / "tune-val.jsonl")
    for path, part in zip(paths, (train[:-val_size], train[-val_size:]), strict=True):
        path.write_text("".join(json.dumps(ex.as_row()) + "\n" for ex in part), encoding="utf-8")
    return paths[0], paths[1], len(train) - val_size
