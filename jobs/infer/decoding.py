"""The parts of jobs/infer/ that work on tensors, arrays and token ids, not on a model:
numeric decodings, statistics of sampled numbers, answer text, seeding.

NumericDecodingProcessor: a transformers LogitsProcessor for greedy generation. At a step
where the greedy token is a number token, it forces instead the number token nearest the
expected value Σ p_k v_k (`expected`), or the weighted median (`median`), of the model's
distribution over number tokens. Other steps pass through untouched.

sample_summary, sample_median: mean, spread, central interval and median of the numbers
parsed from K sampled completions; clock times (minutes of a day) are treated as points on a
circle (`unwrap`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np
import torch
from transformers import LogitsProcessor

from jobs.engines.number_rule import NumberTable, numeric_choice
from jobs.losses.vocab import NumericVocab

NumericMode = Literal["expected", "median"]
NUMERIC_MODES: tuple[NumericMode, ...] = ("expected", "median")


class NumericDecodingProcessor(LogitsProcessor):
    """Replace a greedy number token by the one nearest the distribution's mean or median.

    The distribution is the softmax over the number tokens whose digit length equals the
    greedy token's: with multi-digit vocabularies (LLaMA-3: "0".."999", numbers chunked
    as 100|000|0) swapping "000" for "0" would change the place value of every digit
    after it, so only same-length tokens compete. For digit tokenizers that is all ten.
    Among tokens of equal value (GPT-2's "5" and "Ġ5") the most probable one is taken.
    """

    def __init__(self, vocab: NumericVocab, vocab_size: int, mode: NumericMode) -> None:
        if mode not in NUMERIC_MODES:
            raise ValueError(f"decoding: {mode!r} is not a numeric decoding; use expected|median")
        self.mode = mode
        vocab.slot_lookup(vocab_size)  # refuses number ids outside the vocabulary
        self.table = number_table(vocab, vocab_size)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        # scores: [B, V] next-token logits of every row of the batch.
        self.table = self.table.to(scores.device)
        return numeric_choice(scores, self.table, self.mode)


def number_table(vocab: NumericVocab, width: int) -> NumberTable:
    """The vocabulary's number tokens as the numeric decodings read them."""
    ids, values, lengths = number_lists(vocab)
    return NumberTable.of(ids, values, lengths, width)


def number_lists(vocab: NumericVocab) -> tuple[list[int], list[float], list[int]]:
    """(ids, values, digit lengths) of the number tokens: what crosses to vLLM's worker."""
    return (
        vocab.ids_tensor().tolist(),
        vocab.values_tensor().tolist(),
        vocab.lengths_tensor().tolist(),
    )


def sample_summary(
    values: list[float], mass: float, *, period: float | None = None
) -> tuple[float | None, float | None, tuple[float, float] | None]:
    """(mean, std, central `mass` interval) of parsed samples; (None, None, None) for none.

    std is the population standard deviation (ddof=0) and the interval the
    ((1 − mass)/2, (1 + mass)/2) quantiles, numpy's linear interpolation. With a `period`
    (1440 for clock minutes) the mean is the circular mean, std and interval are those of
    the samples unwrapped to within half a period of it, and the interval's ends are
    wrapped back into [0, period): lo > hi then means it spans midnight.
    """
    if not values:
        return None, None, None
    arr = np.asarray(values, dtype=np.float64)
    quantiles = [(1.0 - mass) / 2.0, (1.0 + mass) / 2.0]
    if period is None:
        lo, hi = np.quantile(arr, quantiles)
        return float(arr.mean()), float(arr.std()), (float(lo), float(hi))
    angles = arr * (2.0 * math.pi / period)
    resultant = complex(np.cos(angles).mean(), np.sin(angles).mean())
    if abs(resultant) < 1e-9:  # evenly spread round the circle: no mean direction exists
        return None, None, None
    mean = (math.atan2(resultant.imag, resultant.real) % (2.0 * math.pi)) * period / (2 * math.pi)
    unwrapped = mean + (arr - mean + period / 2.0) % period - period / 2.0
    lo, hi = np.quantile(unwrapped, quantiles)
    return mean % period, float(unwrapped.std()), (float(lo % period), float(hi % period))


def unwrap(x: float, centre: float, period: float) -> float:
    """x moved by whole periods to within half a period of `centre`."""
    return centre + (x - centre + period / 2.0) % period - period / 2.0


def sample_median(values: Sequence[float], period: float | None) -> float | None:
    """Median of the samples (numpy's, the mean of the middle two for even K); on a circle,
    of the samples unwrapped around their circular mean, wrapped back."""
    if not values:
        return None
    arr = np.asarray(values, dtype=np.float64)
    if period is None:
        return float(np.median(arr))
    centre, _, _ = sample_summary(list(values), 0.5, period=period)
    if centre is None:  # evenly spread round the circle: no median either
        return None
    return float(np.median([unwrap(v, centre, period) for v in arr])) % period


def split_at_eos(new_ids: torch.Tensor, eos_id: int) -> list[tuple[list[int], bool]]:
    """Each row of [B, L] generated ids up to end-of-sequence (excluded), and whether the
    row reached one (generate pads a finished row, with eos when pad is eos)."""
    rows = []
    for row in new_ids.tolist():
        ended = eos_id in row
        rows.append((row[: row.index(eos_id)] if ended else row, ended))
    return rows


def answer_line(tokenizer: Any, ids: list[int]) -> tuple[str, list[str]]:
    """The answer as evaluation reads it (first line, stripped: jobs/infer/evaluate.py), and the
    text pieces of the generated tokens that start before that line ends."""
    text = tokenizer.decode(ids, skip_special_tokens=True)
    pieces = [tokenizer.decode([i], skip_special_tokens=True) for i in ids]
    lead = len(text) - len(text.lstrip())
    end = text.find("\n", lead)
    end = len(text) if end < 0 else end
    tokens, start = [], 0
    for piece in pieces:
        if start >= end:
            break
        if piece:  # special tokens decode to nothing
            tokens.append(piece)
        start += len(piece)
    return text.strip().split("\n", 1)[0], tokens


@contextlib.contextmanager
def seeded(seed: int | None, device: torch.device) -> Iterator[None]:
    """Seed sampling on `device` (CPU, or its CUDA generator too) for the block, leaving the
    caller's random stream as it was; None: no seeding."""
    if seed is None:
        yield
        return
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield
