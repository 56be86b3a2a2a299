"""The rules numtune's greedy decodings apply to next-token logits, torch only, so that
vLLM's worker (jobs/engines/vllm_worker.py) applies them in an environment without
numtune's dependencies, as transformers' generate() does through jobs/infer's processors:
number-first (jobs/infer/number_first.py: where the number tokens' summed probability beats
the most probable other token, only number tokens may follow), and the numeric decodings
(jobs/infer/decoding.py: a greedy number token replaced by the one nearest the mean or the
median of the model's distribution over number tokens)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Self

import torch


def number_mask(ids: torch.Tensor, width: int, device: torch.device) -> torch.Tensor:
    """[V] bool, True at the number tokens' ids ([N]); V = `width`, the logits' width."""
    mask = torch.zeros(width, dtype=torch.bool, device=device)
    mask[ids.to(device)] = True
    return mask


def numbers_first(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`scores` [B, V] with every non-number token at -inf in the rows where numbers win.

    Softmax's normaliser is shared by a row, so the log-sum-exp of the number logits
    against the best other logit compares probabilities. Computed in fp32 whatever the
    scores' dtype (bf16 rounding would tip near-ties)."""
    logits = scores.float()
    number_mass = torch.logsumexp(logits.masked_fill(~mask, -math.inf), dim=-1)  # [B]
    best_other = logits.masked_fill(mask, -math.inf).max(dim=-1).values  # [B]
    numbers_win = number_mass > best_other  # [B]
    return scores.masked_fill(numbers_win[:, None] & ~mask[None, :], -math.inf)


@dataclass(frozen=True)
class NumberTable:
    """The number tokens as the numeric decodings read them: ids [N], values [N] (fp32),
    digit lengths [N], each vocabulary id's slot [V] (-1: not a number) and the slots in
    ascending value [N]."""

    ids: torch.Tensor
    values: torch.Tensor
    lengths: torch.Tensor
    slot: torch.Tensor
    order: torch.Tensor

    @classmethod
    def of(cls, ids: list[int], values: list[float], lengths: list[int], width: int) -> Self:
        """From plain lists (what crosses to vLLM's worker); `width`: the logits' V."""
        ids_t = torch.tensor(ids, dtype=torch.long)
        values_t = torch.tensor(values, dtype=torch.float32)
        slot = torch.full((width,), -1, dtype=torch.long)
        slot[ids_t] = torch.arange(len(ids))
        order = torch.argsort(values_t, stable=True)
        return cls(ids_t, values_t, torch.tensor(lengths, dtype=torch.long), slot, order)

    def to(self, device: torch.device) -> Self:
        if self.ids.device == device:
            return self
        moved = {name: getattr(self, name).to(device) for name in self.__dataclass_fields__}
        return type(self)(**moved)


def numeric_choice(scores: torch.Tensor, table: NumberTable, mode: str) -> torch.Tensor:
    """`scores` [B, V] with each row whose greedy token is a number forced to the number
    token nearest the expected value (`expected`) or the lower weighted median (`median`)
    of the distribution over same-length number tokens (jobs/infer/decoding.py says why);
    other rows untouched. `table` on the scores' device."""
    greedy_slot = table.slot[scores.argmax(dim=-1)]  # [B], -1 where greedy is not a number
    numeric = greedy_slot >= 0  # [B]
    # Only the numeric slice is read; fp32 keeps the softmax exact under bf16 scores.
    logits = scores[:, table.ids].float()  # [B, N]
    same_length = table.lengths[None, :] == table.lengths[greedy_slot.clamp(min=0)][:, None]
    logits = logits.masked_fill(~same_length, -math.inf)  # [B, N]
    probs = torch.softmax(logits, dim=-1)  # [B, N], zero outside the competing tokens
    if mode == "expected":
        target = probs @ table.values  # [B] Σ_k p_k v_k
    else:
        # Lower weighted median: the smallest value whose cumulative mass reaches 1/2.
        cdf = probs[:, table.order].cumsum(dim=-1)  # [B, N] over ascending values
        first = (cdf < 0.5).sum(dim=-1).clamp(max=len(table.order) - 1)  # [B]
        target = table.values[table.order][first]  # [B]
    distance = (table.values[None, :] - target[:, None]).abs()  # [B, N]
    distance = distance.masked_fill(~same_length, math.inf)
    nearest = distance.min(dim=-1, keepdim=True).values  # [B, 1]
    # Ties (equal values, or a mean exactly half-way) go to the more probable token.
    tolerance = 1e-6 * (1.0 + target.abs())[:, None]  # [B, 1]
    candidates = distance <= nearest + tolerance  # [B, N]
    pick = logits.masked_fill(~candidates, -math.inf).argmax(dim=-1)  # [B] slot
    chosen = table.ids[pick]  # [B] vocabulary id
    # A row that is replaced keeps only its chosen token; the others are left as they were.
    forced = torch.full_like(scores, -math.inf).scatter_(1, chosen[:, None], 0.0)  # [B, V]
    return torch.where(numeric[:, None], forced, scores)
