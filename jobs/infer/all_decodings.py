"""Held-out answers under several numeric decodings at once (jobs/spec/decoding.py names
them), for a run's final evaluation.

Per batch of B prompts the prompt is run once (`prefill`, generation.py). The greedy-type
decodings asked (D of greedy, number_first, expected, median) then share ONE greedy
generate() call over [B·D, T] rows: prompt i fills rows i·D … i·D + D − 1 (the cache
`expanded` D times) and `Interleaved` applies decoding j's logits processors to rows
j, j + D, …; rows are independent in generate(), so each row decodes exactly as its
decoding alone would, while the per-step overhead is paid once. The sampled decodings
(sample_mean, sample_median) share one sampling call over [B·K, T] rows (temperature 1, no
top-k or top-p cut, seeded), and their answer is the number summarised, written as text.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor

from jobs.data import Example
from jobs.data.clock import clock_period
from jobs.data.tokenize import collate_prompts, encode_prompt, example_vision
from jobs.infer.decoding import NumericDecodingProcessor, sample_median, sample_summary
from jobs.infer.evaluate import parse_number, parse_time
from jobs.infer.generation import expanded, generate, prefill
from jobs.infer.number_first import NumberFirstProcessor
from jobs.losses.vocab import NoNumericTokensError, NumericVocab
from jobs.modeling.vision import VisionInputs
from jobs.spec.decoding import GREEDY_DECODINGS, SAMPLED_DECODINGS


class Interleaved(LogitsProcessor):
    """Decoding j's processors on rows j, j + D, j + 2D, … of the [B·D, V] scores."""

    def __init__(self, chains: Sequence[Sequence[LogitsProcessor]]) -> None:
        self.chains = [list(chain) for chain in chains]

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        step = len(self.chains)
        out = scores.clone()  # [B·D, V]
        for j, chain in enumerate(self.chains):
            rows, ids = scores[j::step], input_ids[j::step]  # [B, V], [B, L]
            for processor in chain:
                rows = processor(ids, rows)
            out[j::step] = rows
        return out


@dataclass(frozen=True)
class DecodeSettings:
    """How a job decodes its held-out questions (its `train` evaluation settings)."""

    max_new_tokens: int
    batch_size: int
    use_chat_template: bool | None
    number_first: bool  # the job's own greedy decoding groups the number tokens
    samples: int = 16  # K, for the sampled decodings
    seed: int = 0  # the sampled decodings' seed (per batch: seed + its first index)


@dataclass
class Decoded:
    """Each decoding's answer texts (the held-out order) and the seconds spent on each
    pass: `greedy` (every greedy-type decoding together) and `sampled`."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def chains(
    model: Any, tokenizer: Any, decodings: Sequence[str], number_first: bool
) -> list[list[LogitsProcessor]]:
    """The logits processors of each greedy-type decoding; expected and median sit on top of
    the job's own greedy decoding, as serving's predict does. A tokenizer without number
    tokens has nothing to group or replace: every decoding is then plain greedy."""
    try:
        vocab = NumericVocab.from_tokenizer(tokenizer)
    except NoNumericTokensError:
        return [[] for _ in decodings]
    width = int(model.get_output_embeddings().weight.shape[0])  # may exceed len(tokenizer)
    base: list[LogitsProcessor] = [NumberFirstProcessor(vocab)] if number_first else []
    out: list[list[LogitsProcessor]] = []
    for name in decodings:
        if name == "greedy":
            out.append([])
        elif name == "number_first":
            out.append([NumberFirstProcessor(vocab)])
        else:
            out.append([*base, NumericDecodingProcessor(vocab, width, name)])  # type: ignore[arg-type]
    return out


def number_text(value: float | None, period: int | None) -> str:
    """A summarised number as an answer's text: hh:mm for clock minutes, else positional
    (never an exponent, which the answer parser would not read); '' for none."""
    if value is None:
        return ""
    if period is not None:
        minutes = round(value) % period
        return f"{minutes // 60:02d}:{minutes % 60:02d}"
    return str(np.format_float_positional(value, trim="-"))


@torch.no_grad()
def decode_all(
    model: Any,
    tokenizer: Any,
    examples: list[Example],
    decodings: Sequence[str],
    settings: DecodeSettings,
    task: str,
) -> Decoded:
    """Every asked decoding's answers to `examples` (first line, stripped, as evaluation
    reads them); an unknown name is a ValueError."""
    unknown = sorted(set(decodings) - set(GREEDY_DECODINGS) - set(SAMPLED_DECODINGS))
    if unknown:
        raise ValueError(f"decodings: unknown {unknown}")
    greedy = [d for d in GREEDY_DECODINGS if d in decodings]
    sampled = [d for d in SAMPLED_DECODINGS if d in decodings]
    interleaved = Interleaved(chains(model, tokenizer, greedy, settings.number_first))
    out = Decoded({d: [] for d in (*greedy, *sampled)}, {"greedy": 0.0, "sampled": 0.0})
    vision = VisionInputs.of(model)
    for start in range(0, len(examples), settings.batch_size):
        chunk = examples[start : start + settings.batch_size]
        batch = prompt_batch(model, tokenizer, chunk, vision, settings.use_chat_template)
        cache = prefill(model, batch)  # [B, T − 1] once, for every decoding below
        if greedy:
            began = time.perf_counter()
            rows = texts(tokenizer, _generate(model, tokenizer, batch, cache, len(greedy),
                                              settings, processors=[interleaved]))  # fmt: skip
            for j, name in enumerate(greedy):
                out.answers[name].extend(rows[j :: len(greedy)])
            out.seconds["greedy"] += time.perf_counter() - began
        if sampled:
            began = time.perf_counter()
            rows = texts(tokenizer, _generate(model, tokenizer, batch, cache, settings.samples,
                                              settings, seed=settings.seed + start))  # fmt: skip
            summarise(out.answers, rows, settings.samples, sampled, task)
            out.seconds["sampled"] += time.perf_counter() - began
    return out


def prompt_batch(
    model: Any,
    tokenizer: Any,
    chunk: list[Example],
    vision: VisionInputs | None,
    use_chat_template: bool | None,
) -> dict[str, torch.Tensor]:
    """Left-padded [B, T] ids and mask of the prompts as in training, with the images'
    [I, 3, S, S] pixel values for a vision-language model."""
    device = next(model.parameters()).device
    seen = [example_vision(ex, vision) for ex in chunk]
    prompts = [
        encode_prompt(tokenizer, ex.prompt, use_chat_template, v)
        for ex, v in zip(chunk, seen, strict=True)
    ]
    batch = collate_prompts(prompts, tokenizer.pad_token_id)
    pixels = [v.pixels(ex.image) for ex, v in zip(chunk, seen, strict=True) if v and ex.image]
    if pixels:
        batch["pixel_values"] = torch.stack(pixels)
    return {k: v.to(device) for k, v in batch.items()}


def _generate(
    model: Any,
    tokenizer: Any,
    batch: dict[str, torch.Tensor],
    cache: Any,
    rows: int,
    settings: DecodeSettings,
    *,
    processors: Sequence[LogitsProcessor] = (),
    seed: int | None = None,
) -> torch.Tensor:
    """[B·rows, L] new ids: each prompt `rows` times from the shared cache; greedy with
    `processors`, or sampled at temperature 1 with `seed`."""
    # The images are in the cache: generate() takes no pixel_values beside one.
    repeated = {
        k: v.repeat_interleave(rows, dim=0) for k, v in batch.items() if k != "pixel_values"
    }
    return generate(
        model, tokenizer, repeated, max_new_tokens=settings.max_new_tokens,
        temperature=0.0 if seed is None else 1.0, seed=seed, cache=expanded(cache, rows),
        processors=processors,
    )  # fmt: skip


def texts(tokenizer: Any, new_ids: torch.Tensor) -> list[str]:
    """Each row's answer as evaluation reads it: decoded, stripped, its first line."""
    decoded = tokenizer.batch_decode(new_ids, skip_special_tokens=True)
    return [row.strip().split("\n", 1)[0] for row in decoded]


def summarise(
    answers: dict[str, list[str]], rows: list[str], k: int, names: Sequence[str], task: str
) -> None:
    """Append each prompt's sampled answer (rows i·K … i·K + K − 1 are prompt i's) under
    sample_mean and sample_median: the numbers parsed, summarised, written as text."""
    period = clock_period(task)
    parse = parse_time if period is not None else parse_number
    for i in range(0, len(rows), k):
        values = [v for v in (parse(r) for r in rows[i : i + k]) if v is not None]
        values = [v for v in values if np.isfinite(v)]
        circle = None if period is None else float(period)
        if "sample_mean" in names:
            mean, _, _ = sample_summary(values, 0.5, period=circle)
            answers["sample_mean"].append(number_text(mean, period))
        if "sample_median" in names:
            answers["sample_median"].append(number_text(sample_median(values, circle), period))
