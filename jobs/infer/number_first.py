"""Greedy decoding that decides "a number next?" before "which number?".

With multi-digit number tokens (LLaMA-3 has one token for every string "0".."999") a model
can put 97 % of its next-token mass on numbers, spread over ~1,000 of them, while a single
other token (a space, end-of-text) holds 2 %: plain greedy then picks that token, again and
again, and the answer holds no number. The numeric losses make this more likely, not less:
they spread probability over values near the target, which is what they are for. Here the
number tokens compete as one choice against each other token: where their summed
probability beats the most probable other token, the step is restricted to number tokens
(greedy then takes the most probable of them); elsewhere it is left alone. With one token
per digit the same rule decides "another digit or stop?" by the model's total belief in
another digit instead of by its single most likely digit.
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

from jobs.engines.number_rule import number_mask, numbers_first
from jobs.losses.vocab import NumericVocab


class NumberFirstProcessor(LogitsProcessor):
    """A transformers LogitsProcessor for greedy generation (see the module docstring)."""

    def __init__(self, vocab: NumericVocab) -> None:
        self.ids = vocab.ids_tensor()  # [N] vocabulary id of each number token
        self._mask: torch.Tensor | None = None  # [V] bool, True on number tokens

    def number_mask(self, scores: torch.Tensor) -> torch.Tensor:
        """[V] bool on the scores' device; V is the model's head width (may exceed the
        tokenizer's length when the embedding is padded)."""
        mask = self._mask
        if mask is None or mask.shape[0] != scores.shape[-1] or mask.device != scores.device:
            mask = number_mask(self.ids, scores.shape[-1], scores.device)
            self._mask = mask
        return mask

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return numbers_first(scores, self.number_mask(scores))  # scores: [B, V]
