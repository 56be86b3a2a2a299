"""NumericPredictor: a model and tokenizer answering numeric queries (jobs/infer/__init__.py
says how a call runs)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, get_args

from jobs.engines.vllm_engine import EngineError, Row
from jobs.infer.decoding import answer_line, number_lists, sample_median, sample_summary
from jobs.infer.evaluate import parse_number
from jobs.infer.generation import expanded, greedy_and_sampled, prefill, stream_text
from jobs.infer.inputs import Images
from jobs.infer.loaded import LoadedModel
from jobs.infer.results import Completion, Decoding, Prediction, check

log = logging.getLogger(__name__)


class NumericPredictor(LoadedModel):
    """A model answering numeric questions: predict (text, value, and the statistics of K
    samples), sampled_numbers (for calibration), and OpenAI-style complete and stream."""

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
        options: dict[str, Any] = {
            "max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed
        }  # fmt: skip
        rows = None
        if images is None:
            number_ids = self.vocab.ids_tensor().tolist() if self.greedy else None
            rows = self._vllm(
                prompts, chat=True, greedy=True, number_ids=number_ids, samples=samples,
                numeric=self._numeric(decoding), **options,
            )  # fmt: skip
        if rows is None:
            rows = self._greedy_and_drawn(prompts, decoding, samples, images, options)
        greedy, drawn = rows
        parsed = self._parsed(drawn, len(prompts), samples)
        period = self.period
        out = []
        for (ids, _), numbers in zip(greedy, parsed, strict=True):
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

    def _numeric(self, decoding: Decoding) -> dict[str, Any] | None:
        """A numeric decoding as vLLM's worker applies it (jobs/engines/number_rule.py)."""
        if decoding == "greedy":
            return None
        ids, values, lengths = number_lists(self.vocab)
        return {"mode": decoding, "ids": ids, "values": values, "lengths": lengths}

    def _greedy_and_drawn(
        self,
        prompts: list[str],
        decoding: Decoding,
        samples: int,
        images: Images,
        options: dict[str, Any],
    ) -> tuple[list[Row], list[Row]]:
        """predict's rows by transformers' generate(): (greedy, one per prompt; K sampled
        per prompt, prompt i's at i·K … i·K + K − 1)."""
        batch = self._batch(prompts, chat=True, images=images)
        cache = prefill(self.model, batch)  # each prompt run once, for greedy and samples
        numeric = [] if decoding == "greedy" else [self.processors[decoding]]
        processors = [*self.greedy, *numeric]
        if not samples:
            greedy = self._generate(
                batch, max_new_tokens=options["max_new_tokens"], temperature=0.0,
                processors=processors, cache=cache,
            )  # fmt: skip
            return self._split(greedy), []
        # Greedy and samples in one decoding pass (jobs/infer/generation.py).
        greedy, drawn = greedy_and_sampled(
            self.model, self.tokenizer, batch, cache, samples=samples, greedy=processors,
            deadline=self._deadline, **options,
        )  # fmt: skip
        return self._split(greedy), self._split(drawn)

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
        rows = None if images is not None else self._vllm(
            prompts, chat=True, max_new_tokens=max_new_tokens, greedy=False, samples=samples,
            temperature=temperature, seed=seed,
        )  # fmt: skip
        if rows is not None:
            return self._parsed(rows[1], len(prompts), samples)
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
        return self._parsed(self._split(drawn), len(prompts), samples)

    def _parsed(self, drawn: list[Row], prompts: int, samples: int) -> list[list[float]]:
        """Per prompt, the numbers of its rows of `drawn` (B·K rows: prompt i's at i·K …)."""
        parsed: list[list[float]] = [[] for _ in range(prompts)]
        for row, (ids, _) in enumerate(drawn):
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
        both = None if images is not None else self._vllm(
            prompts, chat=chat, max_new_tokens=max_new_tokens, greedy=temperature == 0,
            samples=int(temperature > 0), temperature=temperature or 1.0, top_p=top_p, seed=seed,
        )  # fmt: skip
        if both is not None:
            rows = both[0] or both[1]
            prompt_lengths = self.prompt_tokens(prompts, chat=chat)
        else:
            batch = self._batch(prompts, chat=chat, images=images)
            new = self._generate(
                batch, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                seed=seed,
            )  # fmt: skip
            rows = self._split(new)
            prompt_lengths = batch["attention_mask"].sum(dim=1).tolist()  # [B] without padding
        return [
            Completion(
                text=self.tokenizer.decode(ids, skip_special_tokens=True),
                finish_reason="stop" if ended else "length",
                prompt_tokens=int(n),
                completion_tokens=len(ids) + int(ended),
            )
            for (ids, ended), n in zip(rows, prompt_lengths, strict=True)
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
        options = {"max_new_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p}
        if self.engine is not None and images is None:
            pieces = 0
            try:
                for piece in self._streamed(prompt, chat=chat, seed=seed, **options):
                    pieces += 1
                    yield piece
                return
            except EngineError as error:
                self.close()  # generate() serves this model from now on
                if pieces:  # text already sent: the stream fails, as generate()'s would
                    raise
                log.warning("vLLM failed; generate() streams instead: %s", error)
        batch = self._batch([prompt], chat=chat, images=images)
        yield from stream_text(
            self.model, self.tokenizer, batch, max_new_tokens=max_new_tokens,
            temperature=temperature, top_p=top_p, seed=seed, deadline=self._deadline,
        )  # fmt: skip

    def _streamed(self, prompt: str, *, chat: bool, **options: Any) -> Iterator[str]:
        """stream() on vLLM: the row's text as it grows, a piece at a time once its
        characters are whole (a character can span tokens); joined, complete()'s text."""
        assert self.engine is not None
        [encoded] = self._encode([prompt], chat=chat)
        sent = ""
        rows = self.engine.stream(encoded, deadline=self._deadline, lora=self.lora, **options)
        for (ids, _), last in rows:
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            # Byte-level tokenizers decode prefix-stably: the text only grows, but its end
            # can hold half a character until the next token completes it.
            if (text.endswith("\ufffd") and not last) or not text.startswith(sent):
                continue
            if len(text) > len(sent):
                yield text[len(sent) :]
                sent = text
