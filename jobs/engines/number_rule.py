"""Number-first's rule on next-token logits (jobs/infer/number_first.py says why): where the
number tokens' summed probability beats the most probable other token, only number tokens
may follow. Torch only: vLLM's worker (jobs/engines/vllm_worker.py) applies the same rule
in an environment without numtune's dependencies."""

from __future__ import annotations

import math

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
