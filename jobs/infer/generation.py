"""Generation for the predictor: one place that sets every generation knob, a prompt
prefill that a prompt's greedy answer and its K sampled completions share, and streaming.

K samples, one prefill. Drawing K completions of a prompt by repeating it K times makes
generate() run the whole prompt K times; so does `num_return_sequences=K` (generate()
repeats the inputs before its prefill: a [B·K, T] first forward, measured). Instead
`prefill` runs the left-padded prompts once ([B, T − 1]: all but each row's last
position) and `expanded` repeats the resulting KV cache K times along the batch. generate()
then gets the full [B·K, T] ids and mask with that cache, runs only the uncached last
position ([B·K, 1], the cost of one decoding step) and decodes as before. The cache stops
one position short because generate() computes the first new token's logits itself, from
at least one position it has not cached.

Sampling: generate() always runs greedy (argmax), and with a temperature above 0 the
tokens are drawn by numtune's `Sampler` (jobs/infer/sampling.py: the same distribution as
transformers' sampling, drawn by inverse CDF, one uniform per row and step, instead of a
multinomial over the whole vocabulary). A seed gives the same samples up to floating-point
rounding of the differently-shaped matrix products.

Greedy and K samples, one pass (`greedy_and_sampled`). A decoding step of a 135M model on a
CPU costs far less per row at 17 rows than at 1 (reading the weights dominates a 1-row
step), so the greedy answer and the K samples decode together: one generate() over
[B·K + B] rows, the sampled rows first (prompt i at i·K … i·K + K − 1), then the B greedy
rows. The `Sampler` draws the sampled rows' tokens and hands the greedy rows to the greedy
processors (number-first, the numeric decodings) alone. Row i's draw is element i of each
step's uniform vector, so a seed gives the samples a pass of the K rows alone gives
(calibration's `sampled_numbers`, `complete` on the prompts repeated K times), and the
greedy rows draw nothing (in fp32 exactly, as the tests check; in bf16 a row's logits can
round differently in a batch of another shape, rarely changing a token).
"""

from __future__ import annotations

import copy
import functools
import inspect
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from transformers import (
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    TextIteratorStreamer,
)
from transformers.cache_utils import Cache

from jobs.infer.decoding import seeded
from jobs.infer.sampling import Sampler


@torch.no_grad()
def prefill(model: Any, batch: dict[str, torch.Tensor]) -> Cache | None:
    """The KV cache of every prompt position but the last ([B, T − 1] of the left-padded
    [B, T] batch); None when T is 1 (nothing to share)."""
    ids, mask = batch["input_ids"], batch["attention_mask"]  # [B, T]
    if ids.shape[1] < 2:
        return None
    head = mask[:, :-1]  # [B, T − 1]
    # Positions as generate() numbers them: 0 at each row's first real token, 0 on padding.
    positions = (head.long().cumsum(-1) - 1).masked_fill(head == 0, 0)
    # Its logits go unused (generate() computes them from the last position): models that
    # can skip them keep one [B, 1, V] row instead of [B, T − 1, V].
    extra: dict[str, Any] = (
        {"logits_to_keep": 1}
        if "logits_to_keep" in inspect.signature(model.forward).parameters
        else {}
    )
    if "pixel_values" in batch:  # [I, 3, S, S]: the images enter the cache with their tokens
        extra["pixel_values"] = batch["pixel_values"]
    out = model(
        input_ids=ids[:, :-1], attention_mask=head, position_ids=positions, use_cache=True, **extra
    )
    return out.past_key_values


def expanded(cache: Cache | None, rows: int) -> Cache | None:
    """A copy of `cache` with each prompt's row repeated `rows` times ([B, …] → [B·rows, …]:
    prompt i fills rows i·rows … i·rows + rows − 1, as `repeat_interleave` lays out the ids).
    A copy, because generate() extends the cache it is given."""
    if cache is None:
        return None
    out = copy.deepcopy(cache)
    if rows > 1:
        out.batch_repeat_interleave(rows)
    return out


def selected(cache: Cache | None, rows: torch.Tensor) -> Cache | None:
    """A copy of `cache` holding rows `rows` ([R] indices into its B rows, repeats allowed)."""
    if cache is None:
        return None
    out = copy.deepcopy(cache)
    out.batch_select_indices(rows)
    return out


def greedy_and_sampled(
    model: Any,
    tokenizer: Any,
    batch: dict[str, torch.Tensor],
    cache: Cache | None,
    *,
    samples: int,
    max_new_tokens: int,
    temperature: float,
    greedy: Sequence[LogitsProcessor] = (),
    seed: int | None = None,
    deadline: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One generate() for each prompt's greedy answer and its K samples (module docstring):
    ([B, L] greedy ids, [B·K, L] sampled ids, prompt i's at rows i·K … i·K + K − 1).
    `cache`: `prefill`'s of `batch` (B rows); left as it was."""
    b = batch["input_ids"].shape[0]
    prompts = torch.arange(b, device=batch["input_ids"].device)
    rows = torch.cat([prompts.repeat_interleave(samples), prompts])  # [B·K + B]
    # The images are in the cache: generate() takes no pixel_values beside one.
    wide = {k: v[rows] for k, v in batch.items() if k != "pixel_values"}
    both = Sampler(temperature, rows=b * samples, greedy=greedy)
    out = generate(
        model, tokenizer, wide, max_new_tokens=max_new_tokens, temperature=0.0, seed=seed,
        deadline=deadline, cache=selected(cache, rows), processors=[both],
    )  # fmt: skip
    return out[b * samples :], out[: b * samples]


@torch.no_grad()
def generate(
    model: Any,
    tokenizer: Any,
    batch: dict[str, torch.Tensor],
    *,
    max_new_tokens: int,
    temperature: float,
    top_p: float = 1.0,
    seed: int | None = None,
    deadline: float | None = None,
    cache: Cache | None = None,
    processors: Sequence[LogitsProcessor] = (),
    streamer: TextIteratorStreamer | None = None,
) -> torch.Tensor:
    """[B, L] new token ids (eos then padding after a row ends); temperature 0 is greedy.

    `deadline`: time.monotonic() at which generation stops. `cache`: the batch's prompts
    but their last position, already run (`prefill`, `expanded`), with as many rows as
    `batch`; it is extended in place.
    """
    device = next(model.parameters()).device
    if temperature > 0:  # numtune draws the tokens (sampling.py); generate() takes argmax
        processors = [Sampler(temperature, top_p, before=processors)]
    # Every knob is set here, so a checkpoint's generation_config.json changes nothing.
    config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=False,
        temperature=None,
        top_p=None,
        top_k=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        max_time=None if deadline is None else max(deadline - time.monotonic(), 0.0),
    )
    if cache is not None:
        # The images are in the cache already; generate() would hand them to the forward of
        # the last position alone, which has none of their placeholder tokens.
        batch = {k: v for k, v in batch.items() if k != "pixel_values"}
    with seeded(seed, device):
        out = model.generate(
            **batch,
            generation_config=config,
            logits_processor=LogitsProcessorList(processors),
            streamer=streamer,
            past_key_values=cache,
        )
    return out[:, batch["input_ids"].shape[1] :]


def stream_text(
    model: Any, tokenizer: Any, batch: dict[str, torch.Tensor], **options: Any
) -> Iterator[str]:
    """Text pieces of one completion as they are generated (joined: the completion's text).

    Generation runs in a helper thread feeding a TextIteratorStreamer; an error there is
    raised here once the stream ends. A consumer that stops early leaves the thread to
    finish its (bounded) max_new_tokens.
    """
    streamer = TextIteratorStreamer(tokenizer, skip_prompt=True, skip_special_tokens=True)
    failure: list[Exception] = []
    run_generation = functools.partial(
        generate, model, tokenizer, batch, streamer=streamer, **options
    )

    def run() -> None:
        try:
            run_generation()
        # Any failure is handed to the consumer below and raised there, not swallowed.
        except Exception as error:  # noqa: BLE001
            failure.append(error)
            streamer.end()  # unblocks the consumer

    worker = threading.Thread(target=run, name="numtune-stream", daemon=True)
    worker.start()
    for piece in streamer:
        if piece:
            yield piece
    worker.join()
    if failure:
        raise failure[0]
