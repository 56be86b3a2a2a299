"""Run held-out questions through the serving path and calibrate (jobs/calibration/conformal.py).

    record = calibrate_predictor(predictor, examples, samples=16)

Each batch of questions goes through NumericPredictor as /v1/predict does: greedy and the
`expected` / `median` numeric decodings (one greedy pass each), and K sampled completions
at `temperature` (one pass over the batch repeated K times). `calibrate_checkpoint` is the
end-of-job hook: the job's held-out split, the record written next to the checkpoint's
weights as calibration.json, which registration copies onto the model version.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import pyarrow.fs as pafs

from jobs.calibration.conformal import Calibration, Observation, calibrate
from jobs.calibration.per_question import question_figures
from jobs.calibration.record import CALIBRATION_FILE, LEVELS, QUESTIONS_FILE, QuestionCalibration
from jobs.data import DataError, Example, load_task
from jobs.infer import InferenceRequestError, NumericPredictor
from jobs.modeling.folders import ModelUnavailableError
from jobs.spec import JobSpec

log = logging.getLogger(__name__)

HELD_OUT = "held-out split of the job"


def observe(
    predictor: NumericPredictor,
    examples: Sequence[Example],
    *,
    samples: int,
    max_new_tokens: int = 16,
    temperature: float = 1.0,
    batch_size: int = 32,
    seed: int | None = 0,
    progress: Callable[[int], None] | None = None,
) -> list[Observation]:
    """One Observation per example whose answer parses as a number (others are skipped);
    `progress(k)` is told each time k more questions are done."""
    out: list[Observation] = []
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        prompts = [ex.prompt for ex in chunk]
        images = [ex.image for ex in chunk]
        decoded = {
            mode: predictor.predict(
                prompts, decoding=mode, samples=0, max_new_tokens=max_new_tokens, images=images
            )
            for mode in ("greedy", "expected", "median")
        }
        drawn = predictor.sampled_numbers(
            prompts, samples=samples, max_new_tokens=max_new_tokens,
            temperature=temperature, seed=None if seed is None else seed + start, images=images,
        )  # fmt: skip
        for i, ex in enumerate(chunk):
            answer = predictor.parse(ex.answer)
            if answer is None:
                continue
            out.append(Observation(
                index=start + i, answer=answer, greedy=decoded["greedy"][i].value,
                expected=decoded["expected"][i].value,
                median_decoding=decoded["median"][i].value, samples=drawn[i],
            ))  # fmt: skip
        if progress is not None:
            progress(len(chunk))
    return out


def calibrate_predictor(
    predictor: NumericPredictor,
    examples: Sequence[Example],
    *,
    samples: int,
    max_new_tokens: int = 16,
    temperature: float = 1.0,
    source: str = HELD_OUT,
    progress: Callable[[int], None] | None = None,
    levels: Sequence[float] = LEVELS,
) -> Calibration:
    """The record of these questions (the end-of-job hook's, `/v1/calibrate`'s and
    bench/calibration.py's: one method); ValueError when no answer parses as a number."""
    record, _ = calibrate_questions(
        predictor, examples, samples=samples, max_new_tokens=max_new_tokens,
        temperature=temperature, source=source, progress=progress, levels=levels,
    )  # fmt: skip
    return record


def calibrate_questions(
    predictor: NumericPredictor,
    examples: Sequence[Example],
    *,
    samples: int,
    max_new_tokens: int = 16,
    temperature: float = 1.0,
    source: str = HELD_OUT,
    progress: Callable[[int], None] | None = None,
    levels: Sequence[float] = LEVELS,
) -> tuple[Calibration, list[QuestionCalibration]]:
    """The record and, per question that calibrated, its own figures (per_question.py)."""
    observations = observe(
        predictor, examples, samples=samples, max_new_tokens=max_new_tokens,
        temperature=temperature, progress=progress,
    )  # fmt: skip
    if not observations:
        raise ValueError("no question has a numeric answer to calibrate on")
    record = calibrate(
        observations,
        samples=samples,
        temperature=temperature,
        period=predictor.period,
        source=source,
        levels=levels,
    )
    return record, question_figures(observations, predictor.period)


def calibrate_checkpoint(spec: JobSpec, filesystem: pafs.FileSystem, path: str) -> bool:
    """The end-of-job hook: calibrate the checkpoint at `path` on the job's held-out split and
    write calibration.json into it, each question's figures beside it (QUESTIONS_FILE).
    False (and a warning) when it cannot; never raises for a model or data problem: the job
    itself succeeded."""
    settings = spec.calibration
    if settings.questions == 0:
        return False
    try:
        held = load_task(spec.data).eval[: settings.questions]
        with _local_copy(filesystem, path) as folder:
            predictor = NumericPredictor.from_checkpoint(folder)
        record, figures = calibrate_questions(
            predictor, held, samples=settings.samples, max_new_tokens=settings.max_new_tokens
        )
    except (DataError, ModelUnavailableError, InferenceRequestError, OSError, ValueError) as e:
        log.warning("calibration of %s skipped: %s", path, e)
        return False
    with filesystem.open_output_stream(f"{path}/{CALIBRATION_FILE}") as out:
        out.write(json.dumps(record.model_dump(), indent=2).encode())
    with filesystem.open_output_stream(f"{path}/{QUESTIONS_FILE}") as out:
        out.write("".join(f.model_dump_json() + "\n" for f in figures).encode())
    log.info("calibrated %s on %d held-out questions", path, record.n)
    return True


def _local_copy(filesystem: pafs.FileSystem, path: str) -> AbstractContextManager[str]:
    """The checkpoint as a local folder (itself on local storage, else a temporary copy)."""
    if isinstance(filesystem, pafs.LocalFileSystem):
        return contextlib.nullcontext(path)
    tmp = tempfile.TemporaryDirectory(prefix="numtune-calibrate-")
    pafs.copy_files(path, tmp.name, source_filesystem=filesystem)
    return tmp
