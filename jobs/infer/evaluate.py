"""Greedy generation on held-out examples, numbers parsed from the text, and the scores.

Generation is greedy, by default with number tokens competing as one choice
(`train.eval_decoding`, jobs/infer/number_first.py).

exact_match: the parsed prediction equals the parsed target (for answers that are not a
number, the stripped strings are equal). mae: mean |pred − target| over the predictions
that parse (minutes off on the 24-hour circle for clock times, on the 12-hour dial for
analog clock faces). median_rel_error:
median of |pred − target| / max(|target|, 1). log_error: mean log10(1 + |pred − target|) over
the same answers as mae (jobs/infer/scores.py). parse_failure_rate: share that do not parse.
within_1pct / within_5pct: share with |pred − target| ≤ 1 % / 5 % of |target| (an
unparsed answer is a miss). digit_accuracy: mean share of digit places right, places
aligned at the decimal point (hh:mm as four digits), over the longer of the two numbers.
"""

from __future__ import annotations

import contextlib
import math
import re
import statistics
from fractions import Fraction
from typing import Any

import torch
from transformers import LogitsProcessorList

from jobs.data import Example
from jobs.data.clock import clock_period, minutes_off
from jobs.data.tokenize import collate_prompts, encode_prompt, example_vision
from jobs.infer.number_first import NumberFirstProcessor
from jobs.infer.scores import log_error, mean_defined
from jobs.losses.vocab import NoNumericTokensError, NumericVocab
from jobs.modeling.vision import VisionInputs
from jobs.spec import JobSpec
from jobs.stats import QuestionRecord

TIME = re.compile(r"(?<!\d)([01]?\d|2[0-3]):([0-5]\d)(?!\d)")
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:\s*/\s*-?\d+)?|-?\.\d+")


def parse_time(text: str) -> float | None:
    """Minutes since midnight of the first hh:mm in the text."""
    match = TIME.search(text)
    return None if match is None else int(match.group(1)) * 60 + int(match.group(2))


def parse_number(text: str) -> float | None:
    """The first number in the text: integers, decimals, negatives, "1,234", fractions."""
    match = NUMBER.search(text)
    if match is None:
        return None
    token = match.group(0).replace(",", "").replace(" ", "")
    if "/" in token:
        # Fraction parses a decimal numerator too ("1.1/5", as sampled answers write).
        num, den = (Fraction(part) for part in token.split("/"))
        return None if den == 0 else float(num / den)
    return float(token)


def digit_places(value: float, clock: bool) -> tuple[str, str]:
    """(integer digits, fraction digits) of |value|; a clock time as "hhmm"."""
    if clock:
        minutes = round(value)
        return f"{minutes // 60:02d}{minutes % 60:02d}", ""
    whole, _, frac = f"{abs(value):.12g}".partition(".")
    if "e" in whole + frac:  # beyond 12 significant digits: no place-by-place reading
        return f"{abs(value):.0f}", ""
    return whole, frac


def digit_accuracy(pred: float, target: float, clock: bool) -> float:
    """Share of digit places equal, integer parts right-aligned, fractions left-aligned."""
    (pw, pf), (tw, tf) = digit_places(pred, clock), digit_places(target, clock)
    width, frac = max(len(pw), len(tw)), max(len(pf), len(tf))
    a = pw.rjust(width, " ") + pf.ljust(frac, " ")
    b = tw.rjust(width, " ") + tf.ljust(frac, " ")
    same = sum(x == y for x, y in zip(a, b, strict=True))
    return same / len(a) if (pred < 0) == (target < 0) else 0.0


def judge(pred: str, target: str, period: int | None, prompt: str | None = None) -> QuestionRecord:
    """One answer against its target, as the metrics count it (`period`: a clock task's)."""
    parse = parse_time if period is not None else parse_number
    p, t = parse(pred), parse(target)
    if t is None:  # a non-numeric answer: compare text
        same = pred.strip() == target.strip()
        return QuestionRecord(
            prompt=prompt, target=target, prediction=pred, value=p, target_value=None,
            correct=same, abs_error=None, digit_accuracy=float(same),
        )  # fmt: skip
    if p is None:
        return QuestionRecord(
            prompt=prompt, target=target, prediction=pred, value=None, target_value=t,
            correct=False, abs_error=None, digit_accuracy=0.0,
        )  # fmt: skip
    err = minutes_off(p, t, period) if period is not None else abs(p - t)
    return QuestionRecord(
        prompt=prompt, target=target, prediction=pred, value=p, target_value=t,
        correct=err <= 1e-9 * max(1.0, abs(t)), abs_error=err,
        digit_accuracy=digit_accuracy(p, t, period is not None), log_error=log_error(err),
    )  # fmt: skip


def question_records(
    preds: list[str], targets: list[str], task: str, prompts: list[str] | None = None
) -> list[QuestionRecord]:
    """Each answer judged (same order): what `score` aggregates and predictions.jsonl keeps."""
    period = clock_period(task)
    asked = prompts if prompts is not None else [None] * len(preds)
    return [
        judge(pred, target, period, prompt)
        for pred, target, prompt in zip(preds, targets, asked, strict=True)
    ]


def score_records(records: list[QuestionRecord]) -> dict[str, float]:
    """The metrics of judged answers (the module's docstring defines each)."""
    n = max(len(records), 1)
    numeric = [r for r in records if r.target_value is not None]
    parsed = [r for r in numeric if r.abs_error is not None]

    def within(share: float, r: QuestionRecord) -> bool:
        if r.target_value is None or r.abs_error is None:
            return r.correct  # a text answer counts when exact; unparsed: a miss
        return r.abs_error <= share * abs(r.target_value) + 1e-9

    errors = [r.abs_error for r in parsed if r.abs_error is not None]
    relative = [
        e / max(abs(r.target_value or 0.0), 1.0) for r, e in zip(parsed, errors, strict=True)
    ]
    logs = mean_defined([log_error(e) for e in errors])
    return {
        "exact_match": sum(r.correct for r in records) / n,
        "mae": statistics.fmean(errors) if errors else math.nan,
        "median_rel_error": statistics.median(relative) if relative else math.nan,
        "log_error": math.nan if logs is None else logs,
        "parse_failure_rate": (len(numeric) - len(parsed)) / n,
        "within_1pct": sum(within(0.01, r) for r in records) / n,
        "within_5pct": sum(within(0.05, r) for r in records) / n,
        "digit_accuracy": sum(r.digit_accuracy or 0.0 for r in records) / n,
    }


def score(preds: list[str], targets: list[str], task: str) -> dict[str, float]:
    return score_records(question_records(preds, targets, task))


@torch.no_grad()
def generate_answers(
    model: Any,
    tokenizer: Any,
    examples: list[Example],
    *,
    max_new_tokens: int,
    batch_size: int,
    use_chat_template: bool | None,
    number_first: bool = True,
) -> list[str]:
    """Greedy completions of each prompt, decoded up to end-of-sequence or a new line;
    `number_first`: number tokens compete as one choice (a tokenizer without any: plain).
    Examples with an image show it to a vision-language model (pixel_values [I, 3, S, S])."""
    device = next(model.parameters()).device
    vision = VisionInputs.of(model)
    processors = LogitsProcessorList()
    if number_first:
        # A tokenizer without number tokens has nothing to group: plain greedy is the same.
        with contextlib.suppress(NoNumericTokensError):
            processors.append(NumberFirstProcessor(NumericVocab.from_tokenizer(tokenizer)))
    out: list[str] = []
    for start in range(0, len(examples), batch_size):
        chunk = examples[start : start + batch_size]
        seen = [example_vision(ex, vision) for ex in chunk]
        prompts = [
            encode_prompt(tokenizer, ex.prompt, use_chat_template, v)
            for ex, v in zip(chunk, seen, strict=True)
        ]
        batch = collate_prompts(prompts, tokenizer.pad_token_id)
        pixels = [v.pixels(ex.image) for ex, v in zip(chunk, seen, strict=True) if v and ex.image]
        images = {"pixel_values": torch.stack(pixels).to(device)} if pixels else {}
        generated = model.generate(
            **images,
            input_ids=batch["input_ids"].to(device),
            attention_mask=batch["attention_mask"].to(device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            logits_processor=processors,
        )
        new = generated[:, batch["input_ids"].shape[1] :]
        for row in tokenizer.batch_decode(new, skip_special_tokens=True):
            out.append(row.strip().split("\n", 1)[0])
    return out


def answers_for_spec(
    model: Any, tokenizer: Any, examples: list[Example], spec: JobSpec
) -> list[str]:
    """Greedy answers with a job's own evaluation settings (training and benchmarks)."""
    return generate_answers(
        model,
        tokenizer,
        examples,
        max_new_tokens=spec.train.eval_max_new_tokens,
        batch_size=max(8, spec.train.batch_size),
        use_chat_template=spec.model.use_chat_template,
        number_first=spec.train.eval_decoding == "number_first",
    )
