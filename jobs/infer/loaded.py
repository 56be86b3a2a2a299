"""LoadedModel: what NumericPredictor (predictor.py) answers with: a checkpoint's model and
tokenizer, the prompt encoding of training, generate() with its time limit, and the vLLM
engine where the replica has one."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Self

import torch
from transformers import LogitsProcessor

from jobs.data.clock import clock_period
from jobs.data.tokenize import collate_prompts, uses_chat_template
from jobs.engines.vllm_engine import (
    EngineConfig,
    EngineError,
    Lora,
    Row,
    VllmEngine,
    start_engine,
)
from jobs.infer.checkpoint_spec import read_checkpoint_spec
from jobs.infer.decoding import NUMERIC_MODES, NumericDecodingProcessor, split_at_eos
from jobs.infer.evaluate import parse_number, parse_time
from jobs.infer.generation import generate
from jobs.infer.inputs import Images, encode_prompts, pixel_values
from jobs.infer.number_first import NumberFirstProcessor
from jobs.infer.results import TASKS, check
from jobs.losses.vocab import NumericVocab
from jobs.modeling.model import load_checkpoint_model, load_tokenizer_for
from jobs.modeling.vision import VisionInputs
from jobs.spec import JobSpec, ModelSpec

log = logging.getLogger(__name__)


class LoadedModel:
    """A model and tokenizer ready to generate for numeric questions (CPU or the model's
    device), with vLLM beside where given: loading, prompt encoding and the generation
    calls NumericPredictor (predictor.py) builds its answers from."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        task: str = "arithmetic",
        use_chat_template: bool | None = None,
        number_first: bool = True,
        engine: VllmEngine | None = None,
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
        # vLLM decodes what it can (text prompts: greedy answers under numtune's rules,
        # samples, completions); transformers' generate() the rest (images, streaming, and
        # everything once an engine has failed).
        self.engine = engine
        self.lora: Lora | None = None  # the adapter vLLM decodes with (an adapter version)
        self.owns_engine = True  # an adapter's engine is its base's, shared: never closed here

    def use_engine(self, engine: VllmEngine, *, lora: Lora | None, owned: bool) -> None:
        """Decode on `engine` from now on (with adapter `lora`); `owned`: close it with this
        model (False where other models share it)."""
        self.engine, self.lora, self.owns_engine = engine, lora, owned

    def close(self) -> None:
        """Stop the vLLM worker this model owns, if any, and decode on generate() from now
        on (Serve's multiplexer calls __del__ when it evicts a model)."""
        if self.engine is not None and self.owns_engine:
            self.engine.close()
        self.engine = None

    def __del__(self) -> None:
        if hasattr(self, "engine"):  # not when __init__ refused its arguments
            self.close()

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
        cls,
        path: str | os.PathLike[str],
        spec: JobSpec | None,
        model: Any = None,
        engine: EngineConfig | None = None,
    ) -> Self:
        """A checkpoint folder's model and tokenizer with its spec already parsed (the serving
        replica hands the registry's record): spec.json is not read. None: a plain model
        folder (arithmetic task, the tokenizer's default prompt format). `engine`: start a
        vLLM worker on the folder too, where it can run (jobs/engines/vllm_engine.py)."""
        model = load_checkpoint_model(Path(path)) if model is None else model
        tokenizer = load_tokenizer_for(ModelSpec(source=str(path)))
        options: dict[str, Any] = {}
        if spec is not None:
            options["task"] = spec.data.task
            options["use_chat_template"] = spec.model.use_chat_template
            options["number_first"] = spec.train.eval_decoding == "number_first"
        if engine is not None and VisionInputs.of(model) is None:
            options["engine"] = start_engine(path, tokenizer.eos_token_id, engine)
        return cls(model, tokenizer, **options)

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

    def _vllm(
        self, prompts: Sequence[str], *, chat: bool, **options: Any
    ) -> tuple[list[Row], list[Row]] | None:
        """vLLM's (greedy rows, sampled rows) for text prompts (VllmEngine.decode), or None
        where it has none to give: no engine, or it failed; a failed one is dropped, and
        generate() answers this call and every later one."""
        if self.engine is None:
            return None
        encoded = self._encode(prompts, chat=chat)
        try:
            return self.engine.decode(encoded, deadline=self._deadline, lora=self.lora, **options)
        except EngineError as error:
            log.warning("vLLM failed; generate() serves this model from now on: %s", error)
            self.close()
            return None

    def _split(self, new_ids: torch.Tensor) -> list[Row]:
        return split_at_eos(new_ids, self.tokenizer.eos_token_id)

    def parse(self, text: str) -> float | None:
        """The number evaluation would read; a digit run too long for a float counts as none."""
        value = parse_time(text) if self.period is not None else parse_number(text)
        return value if value is not None and math.isfinite(value) else None
