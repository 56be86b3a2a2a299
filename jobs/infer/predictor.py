"""NumericPredictor: a model and tokenizer answering numeric queries (jobs/infer/__init__.py
says how a call runs)."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Self, get_args

import torch
from transformers import LogitsProcessor

from jobs.data.clock import clock_period
from jobs.data.tokenize import collate_prompts, uses_chat_template
from jobs.infer.checkpoint_spec import read_checkpoint_spec
from jobs.infer.decoding import (
    NUMERIC_MODES,
    NumericDecodingProcessor,
    answer_line,
    sample_median,
    sample_summary,
    split_at_eos,
)
from jobs.infer.evaluate import parse_number, parse_time
from jobs.infer.generation import (
    expanded,
    generate,
    greedy_and_sampled,
    prefill,
    stream_text,
)
from jobs.infer.inputs import Images, encode_prompts, pixel_values
from jobs.infer.number_first import NumberFirstProcessor
from jobs.infer.results import TASKS, Completion, Decoding, Prediction, check
from jobs.losses.vocab import NumericVocab
from jobs.modeling.model import load_checkpoint_model, load_tokenizer_for
from jobs.modeling.vision import VisionInputs
from jobs.spec import JobSpec, ModelSpec

log = logging.getLogger(__name__)


class NumericPredictor:
    """A model and tokenizer ready to answer numeric questions (CPU or the model's device)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        task: str = "arithmetic",
        use_chat_template: bool | None = None,
        number_first: bool = True,
    ) -> None:
        check(task in TASKS, f"task: {task!r} is not one of {', '.join(TASKS)}")
        uses_chat_template(tokenizer, use_chat_template)  # asking for a missing template fails now
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.task = task
        self.use_chat_template = use_chat_template
        self.vocab = NumericVocab.from_tokenizer(tokenizer)
        self.vision = VisionInputs.of(model)  # None: a text-only model
        # The logits' width is the output layer's, which can exceed len(tokenizer).
        width = int(model.get_output_embeddings().weight.shape[0])
        self.processors = {m: NumericDecodingProcessor(self.vocab, width, m) for m in NUMERIC_MODES}
        # predict's greedy answer decodes as evaluation did (the job's train.eval_decoding).
        self.greedy: list[LogitsProcessor] = (
            [NumberFirstProcessor(self.vocab)] if number_first else []
        )
        self._deadline: float | None = None  # time.monotonic() at which generation stops

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike[str], model: Any = None) -> Self:
        """Load a local checkpoint folder (jobs/train/checkpoint.py): safetensors weights only.

        Task and prompt format come from its spec.json; a plain model folder without one
        is taken as an arithmetic model with the tokenizer's default prompt format. `model`:
        the folder's model already loaded (serving's shared base with this adapter on).
        """
        folder = Path(path)
        if model is None:
            model = load_checkpoint_model(folder)  # refuses folders without safetensors weights
        return cls.from_spec(folder, read_checkpoint_spec(folder), model)

    @classmethod
    def from_spec(
        cls, path: str | os.PathLike[str], spec: JobSpec | None, model: Any = None
    ) -> Self:
        """A checkpoint folder's model and tokenizer with its spec already parsed (the serving
        replica hands the registry's record): spec.json is not read. None: a plain model
        folder (arithmetic task, the tokenizer's default prompt format)."""
        model = load_checkpoint_model(Path(path)) if model is None else model
        tokenizer = load_tokenizer_for(ModelSpec(source=str(path)))
        if spec is None:
            return cls(model, tokenizer)
        chat, decoding = spec.model.use_chat_template, spec.train.eval_decoding
        return cls(
            model,
            tokenizer,
            task=spec.data.task,
            use_chat_template=chat,
            number_first=decoding == "number_first",
        )

    @property
    def period(self) -> float | None:
        """Minutes round the clock for a task of times (their statistics are circular)."""
        minutes = clock_period(self.task)
        return None if minutes is None else float(minutes)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ---- the shared machinery -----------------------------------------------------------

    def prompt_tokens(
        self, prompts: Sequence[str], *, chat: bool, images: Images = None
    ) -> list[int]:
        """Each prompt's length in tokens as generation sees it (serving's request budget)."""
        return [len(ids) for ids in self._encode(prompts, chat=chat, images=images)]

    @contextlib.contextmanager
    def time_limit(self, seconds: float) -> Iterator[None]:
        """Generation inside the block stops once `seconds` have passed since it began (the
        caller tells a cut-short answer by the clock). One caller at a time: serving holds
        the replica's compute turn around it."""
        self._deadline = time.monotonic() + seconds
        try:
            yield
        finally:
            self._deadline = None

    def _batch(
        self, prompts: Sequence[str], *, chat: bool, images: Images = None
    ) -> dict[str, torch.Tensor]:
        """Left-padded [B, T] input_ids and attention_mask, formatted as in training if chat;
        with images, their [I, 3, S, S] pixel_values (I: the prompts that have one)."""
        batch = collate_prompts(
            self._encode(prompts, chat=chat, images=images), self.tokenizer.pad_token_id
        )
        pixels = pixel_values(self.vision, images)
        if pixels is not None:
            batch["pixel_values"] = pixels
        return {k: v.to(self.device) for k, v in batch.items()}

    def _encode(
        self, prompts: Sequence[str], *, chat: bool, images: Images = None
    ) -> list[list[int]]:
        return encode_prompts(
            self.tokenizer,
            prompts,
            images,
            chat=chat,
            use_chat_template=self.use_chat_template,
            vision=self.vision,
        )

    def _generate(self, batch: dict[str, torch.Tensor], **options: Any) -> torch.Tensor:
        """[B, L] new ids (jobs/generation.py's `generate`), cut off at time_limit's deadline."""
        return generate(self.model, self.tokenizer, batch, deadline=self._deadline, **options)

    def _split(self, new_ids: torch.Tensor) -> list[tuple[list[int], bool]]:
        return split_at_eos(new_ids, self.tokenizer.eos_token_id)

    def parse(self, text: str) -> float | None:
        """The number evaluation would read; a digit run too long for a float counts as none."""
        value = parse_time(text) if self.period is not None else parse_number(text)
        return value if value is not None and math.isfinite(value) else None

    # ---- the public calls -----------------------------------------------------------------

    def predict(
        self,
        prompts: list[str],
        *,
        max_new_tokens: int = 16,
        decoding: Decoding = "greedy",
        samples: int = 16,
        interval_mass: float = 0.9,
        temperature: float = 1.0,
        seed: int | None = None,
        images: Images = None,
    ) -> list[Prediction]:
        """One Prediction per prompt (same order); samples=0 skips the sampled statistics."""
        check(max_new_tokens >= 1, "max_new_tokens: must be at least 1")
        check(decoding in get_args(Decoding), "decoding: use greedy, expected or median")
        check(samples >= 0, "samples: must be 0 or more")
        check(0.0 < interval_mass <= 1.0, "interval_mass: must be in (0, 1]; 1 is the range")
        check(temperature > 0, "temperature: sampling needs a temperature above 0")
        batch = self._batch(prompts, chat=True, images=images)
        cache = prefill(self.model, batch)  # each prompt run once, for greedy and samples
        numeric = [] if decoding == "greedy" else [self.processors[decoding]]
        processors = [*self.greedy, *numeric]
        if samples:  # greedy and samples in one decoding pass (jobs/infer/generation.py)
            greedy, drawn = greedy_and_sampled(
                self.model, self.tokenizer, batch, cache, samples=samples,
                max_new_tokens=max_new_tokens, temperature=temperature, greedy=processors,
                seed=seed, deadline=self._deadline,
            )  # fmt: skip
        else:
            greedy = self._generate(
                batch, max_new_tokens=max_new_tokens, temperature=0.0, processors=processors,
                cache=cache,
            )  # fmt: skip
            drawn = greedy[:0]
        parsed = self._parsed(drawn, len(prompts), samples)
        period = self.period
        out = []
        for (ids, _), numbers in zip(self._split(greedy), parsed, strict=True):
            text, tokens = answer_line(self.tokenizer, ids)
            value = self.parse(text)
            mean, std, interval = sample_summary(numbers, interval_mass, period=period)
            median = sample_median(numbers, period)
            reason = None if value is not None else self._why_no_value(text)
            out.append(Prediction(
                text=text, value=value, value_reason=reason, expected_value=mean, std=std,
                median=median, interval=interval, interval_mass=interval_mass, samples=samples,
                parsed_samples=len(numbers), tokens=tokens, sampled_values=list(numbers),
            ))  # fmt: skip
        return out

    def sampled_numbers(
        self,
        prompts: list[str],
        *,
        samples: int,
        max_new_tokens: int = 16,
        temperature: float = 1.0,
        seed: int | None = None,
        images: Images = None,
    ) -> list[list[float]]:
        """Per prompt, the numbers parsed from its `samples` sampled completions (what
        predict() summarises; calibration keeps them whole)."""  # fmt: skip
        check(samples >= 1 and temperature > 0, "samples: sampling needs samples ≥ 1, T > 0")
        batch = self._batch(prompts, chat=True, images=images)
        cache = prefill(self.model, batch)
        # [B·K, T] ids and a [B·K, …] cache: prompt i fills rows i·K … i·K + K − 1.
        # (The images are in the cache: generate() takes no pixel_values beside one.)
        repeated = {
            k: v.repeat_interleave(samples, dim=0) for k, v in batch.items() if k != "pixel_values"
        }
        drawn = self._generate(
            repeated, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
            cache=expanded(cache, samples),
        )  # fmt: skip
        return self._parsed(drawn, len(prompts), samples)

    def _parsed(self, drawn: torch.Tensor, prompts: int, samples: int) -> list[list[float]]:
        """Per prompt, the numbers of its rows of `drawn` ([B·K, L]: prompt i's at i·K …)."""
        parsed: list[list[float]] = [[] for _ in range(prompts)]
        for row, (ids, _) in enumerate(self._split(drawn)):
            number = self.parse(answer_line(self.tokenizer, ids)[0])
            if number is not None:
                parsed[row // samples].append(number)
        return parsed

    def _why_no_value(self, text: str) -> str:
        if not text:
            return "the model generated no text"
        if parse_number(text) is not None:  # found, but not finite
            return "the number in the generated text is too large for a float"
        what = "hh:mm time" if self.period is not None else "number"
        return f"no {what} in the generated text"

    def _check_sampling(self, max_new_tokens: int, temperature: float, top_p: float) -> None:
        check(max_new_tokens >= 1, "max_new_tokens: must be at least 1")
        check(temperature >= 0, "temperature: must be 0 (greedy) or more")
        check(0.0 < top_p <= 1.0, "top_p: must be in (0, 1]")

    def complete(
        self,
        prompts: list[str],
        *,
        max_new_tokens: int = 16,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        chat: bool = False,
        images: Images = None,
    ) -> list[Completion]:
        """Plain completions (OpenAI-style): raw prompts, or with chat=True each prompt as a
        user question formatted as in training (what /v1/chat/completions wants)."""
        self._check_sampling(max_new_tokens, temperature, top_p)
        batch = self._batch(prompts, chat=chat, images=images)
        new = self._generate(
            batch, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed
        )
        prompt_lengths = batch["attention_mask"].sum(dim=1).tolist()  # [B] without padding
        return [
            Completion(
                text=self.tokenizer.decode(ids, skip_special_tokens=True),
                finish_reason="stop" if ended else "length",
                prompt_tokens=int(n),
                completion_tokens=len(ids) + int(ended),
            )
            for (ids, ended), n in zip(self._split(new), prompt_lengths, strict=True)
        ]

    def stream(
        self,
        prompt: str,
        *,
        max_new_tokens: int = 16,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        chat: bool = False,
        images: Images = None,
    ) -> Iterator[str]:
        """Text pieces of one completion as they are generated (joined: complete()'s text);
        an error in generation is raised once the stream ends (jobs/generation.py)."""
        self._check_sampling(max_new_tokens, temperature, top_p)
        batch = self._batch([prompt], chat=chat, images=images)
        yield from stream_text(
            self.model, self.tokenizer, batch, max_new_tokens=max_new_tokens,
            temperature=temperature, top_p=top_p, seed=seed, deadline=self._deadline,
        )  # fmt: skip
