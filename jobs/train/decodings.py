"""The final evaluation under every decoding a job asks for (`train.eval_decodings`,
jobs/spec/decoding.py): on the held-out questions and, when the job held training rows out
(`data.validation_size`), on those. Each decoding's answers are judged and scored exactly as
the primary ones (jobs/infer/evaluate.py), written beside predictions.jsonl, and summed up in
decodings.json (`DecodingsRecord`). Rank 0 alone runs it, after the primary evaluation: no
collective, so the other ranks simply wait at the next report.
"""

from __future__ import annotations

import logging
from typing import Any

from jobs.data import Example, load_task
from jobs.infer.all_decodings import Decoded, DecodeSettings, decode_all
from jobs.infer.evaluate import question_records, score_records
from jobs.records.models import PREDICTIONS, DecodingScores, DecodingsRecord
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec
from jobs.stats import QuestionRecord

log = logging.getLogger(__name__)
EVAL = "eval_"


def settings_of(spec: JobSpec) -> DecodeSettings:
    """The job's own evaluation settings (the batch as answers_for_spec sizes it)."""
    return DecodeSettings(
        max_new_tokens=spec.train.eval_max_new_tokens,
        batch_size=max(8, spec.train.batch_size),
        use_chat_template=spec.model.use_chat_template,
        number_first=spec.train.eval_decoding == "number_first",
        samples=spec.train.eval_samples,
        seed=spec.train.seed,
    )


def file_name(decoding: str, validation: bool, primary: str) -> str:
    if validation:
        return f"predictions-validation-{decoding}.jsonl"
    return PREDICTIONS if decoding == primary else f"predictions-{decoding}.jsonl"


def judged(decoded: Decoded, examples: list[Example], task: str) -> dict[str, list[QuestionRecord]]:
    targets, prompts = [ex.answer for ex in examples], [ex.prompt for ex in examples]
    return {
        name: question_records(answers, targets, task, prompts)
        for name, answers in decoded.answers.items()
    }


def score_decodings(
    model: Any,
    tokenizer: Any,
    spec: JobSpec,
    test: list[Example],
    validation: list[Example],
    primary: tuple[list[QuestionRecord], dict[str, float]],
) -> tuple[DecodingsRecord, dict[str, list[QuestionRecord]]]:
    """The record and every decoding's judged answers by file name; `primary`: the primary
    decoding's test answers and eval_ metrics, already computed (reused, not redone)."""
    first = spec.train.eval_decoding
    extra = [d for d in spec.train.eval_decodings if d != first]
    settings, task = settings_of(spec), spec.data.task
    on_test = decode_all(model, tokenizer, test, extra, settings, task)
    tested = judged(on_test, test, task) | {first: primary[0]}
    on_val = decode_all(model, tokenizer, validation, [first, *extra], settings, task)
    validated = judged(on_val, validation, task) if validation else {}
    files: dict[str, list[QuestionRecord]] = {}
    scores: dict[str, DecodingScores] = {}
    for name in [first, *extra]:
        files[file_name(name, False, first)] = tested[name]
        metrics = (
            {k.removeprefix(EVAL): v for k, v in primary[1].items()}
            if name == first
            else score_records(tested[name])
        )
        scores[name] = DecodingScores(metrics=metrics, predictions=file_name(name, False, first))
        if name in validated:
            files[file_name(name, True, first)] = validated[name]
            scores[name].validation = score_records(validated[name])
            scores[name].validation_predictions = file_name(name, True, first)
    seconds = {
        k: on_test.seconds.get(k, 0.0) + on_val.seconds.get(k, 0.0) for k in ("greedy", "sampled")
    }
    record = DecodingsRecord(
        primary=first,
        samples=settings.samples,
        validation_rows=len(validation),
        scores=scores,
        seconds=seconds,
    )
    return record, files


def final_decodings(
    model: Any,
    tokenizer: Any,
    test: list[Example],
    spec: JobSpec,
    primary: tuple[list[QuestionRecord], dict[str, float]],
    files: RunFiles,
) -> DecodingsRecord:
    """score_decodings on the job's test questions and its validation rows (the same data
    loading that carved them out of training), written to the run's folder."""
    validation = load_task(spec.data).validation if spec.data.validation_size else []
    record, answers = score_decodings(model, tokenizer, spec, test, validation, primary)
    for name, records in answers.items():
        if name != PREDICTIONS:  # the primary evaluation wrote its own
            files.write_predictions(records, name)
    files.write_decodings(record)
    log.info("final evaluation under %s: %s", ", ".join(record.scores), record.seconds)
    return record
