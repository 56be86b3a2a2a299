"""numtune's own token sampler, run as a logits processor inside a greedy generate().

Why not generate()'s sampling: it draws each step with `torch.multinomial` over the whole
[R, V] distribution, which on a CPU costs ~28 ms a step for 16 rows of SmolLM2's 49,152-token
vocabulary (one thread) — 14 % of a K = 16 request, all of it spent on random numbers.
Here each sampled row draws one uniform u per step and takes the first token whose
cumulative probability exceeds u (inverse CDF: `searchsorted` over the row's [V] cumulative
sum, ~4 ms for the same 16 rows). The distribution is the same — softmax of the logits after
the same transformers warpers (temperature, top-p; no top-k) — the random stream is not:
a seed gives numtune's samples, not those transformers' sampling would draw.

`Sampler` draws for rows [0, rows) (all rows when rows is None) and leaves each drawn token
the only finite logit, so generate()'s argmax takes it; the rows after `rows` are greedy
rows that it hands to the `greedy` processors (number-first, the numeric decodings) alone.
So one generate() can decode a prompt's greedy answer and its K samples together
(jobs/infer/generation.py). The row draws u from a [S] uniform vector per step, row i taking
element i: a row's draw does not depend on how many greedy rows follow it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from transformers import LogitsProcessor, TemperatureLogitsWarper, TopPLogitsWarper


class Sampler(LogitsProcessor):
    """Sampled rows first, greedy rows after (module docstring)."""

    def __init__(
        self,
        temperature: float,
        top_p: float = 1.0,
        *,
        rows: int | None = None,
        before: Sequence[LogitsProcessor] = (),
        greedy: Sequence[LogitsProcessor] = (),
    ) -> None:
        if temperature <= 0:
            raise ValueError("temperature: sampling needs a temperature above 0")
        self.rows = rows
        # Processors the sampled rows' logits go through before the warpers, as in generate().
        self.before = list(before)
        self.warpers: list[LogitsProcessor] = []
        if temperature != 1.0:
            self.warpers.append(TemperatureLogitsWarper(temperature))
        if top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(top_p))
        self.greedy = list(greedy)

    def draw(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """[S, 1] token ids drawn from the rows' [S, V] logits."""
        for processor in (*self.before, *self.warpers):
            scores = processor(input_ids, scores)
        # fp64: the cumulative sum over ~50k tokens keeps each token's share to ~1e-16.
        cdf = torch.softmax(scores.double(), dim=-1).cumsum(dim=-1)  # [S, V]
        u = torch.rand(scores.shape[0], 1, dtype=torch.float64, device=scores.device)  # [S, 1]
        # The first token whose cumulative probability exceeds u·total: a zero-probability
        # token (top-p's cut, -inf logits) repeats its predecessor's value and is never taken.
        return torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp(max=cdf.shape[1] - 1)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        # scores: [R, V] next-token logits (fp32), R = S sampled rows, then greedy rows.
        s = scores.shape[0] if self.rows is None else self.rows
        head, tail = scores[:s], scores[s:]
        drawn = self.draw(input_ids[:s], head)  # [S, 1]
        chosen = torch.full_like(head, -math.inf).scatter_(1, drawn, 0.0)  # argmax: drawn
        greedy_ids = input_ids[s:]
        for processor in self.greedy:
            tail = processor(greedy_ids, tail)
        return torch.cat([chosen, tail])
