"""numtune's sampler (jobs/infer/sampling.py): it draws from the distribution transformers'
sampling draws from (softmax after temperature and top-p), never a token those warpers
removed, one uniform per row and step, and leaves the greedy rows to their processors."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import LogitsProcessor

from jobs.infer.sampling import Sampler

V = 6


def frequencies(sampler: Sampler, logits: torch.Tensor, rows: int) -> torch.Tensor:
    """[V] share of each token over `rows` identical sampled rows of `logits` ([V])."""
    torch.manual_seed(0)
    scores = logits.repeat(rows, 1)  # [rows, V]
    out = sampler(torch.zeros(rows, 1, dtype=torch.long), scores)  # [rows, V], one finite
    assert torch.equal((out == 0).sum(dim=1), torch.ones(rows, dtype=torch.long))
    drawn = out.argmax(dim=1)  # [rows]
    return torch.bincount(drawn, minlength=V).double() / rows


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.5, 1.0), (1.5, 0.8)])
def test_draws_follow_the_warped_distribution(temperature: float, top_p: float) -> None:
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -math.inf])
    warped = logits / temperature
    probs = torch.softmax(warped.double(), dim=0)
    if top_p < 1.0:  # the smallest set of most probable tokens holding top_p (transformers')
        order = probs.argsort(descending=True)
        kept = order[: int((probs[order].cumsum(0) < top_p).sum()) + 1]
        probs = torch.zeros_like(probs).index_put_((kept,), probs[kept])
        probs /= probs.sum()
    n = 20_000
    seen = frequencies(Sampler(temperature, top_p), logits, n)
    # Within 5 standard errors of each token's probability; removed tokens never drawn.
    assert torch.all((seen - probs).abs() <= 5 * (probs * (1 - probs) / n).sqrt() + 1e-12)
    assert torch.all(seen[probs == 0] == 0)


class Doubled(LogitsProcessor):
    """A greedy processor that records the rows it saw."""

    def __init__(self) -> None:
        self.rows: list[int] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.rows.append(scores.shape[0])
        return scores * 2


def test_greedy_rows_go_to_their_processors_and_do_not_move_the_draws() -> None:
    logits = torch.randn(5, V, generator=torch.Generator().manual_seed(1))  # 3 sampled, 2 greedy
    ids = torch.zeros(5, 1, dtype=torch.long)
    seen = Doubled()
    torch.manual_seed(4)
    out = Sampler(1.0, rows=3, greedy=[seen])(ids, logits)
    assert seen.rows == [2] and torch.equal(out[3:], logits[3:] * 2)
    torch.manual_seed(4)
    alone = Sampler(1.0)(ids[:3], logits[:3])  # the sampled rows without the greedy ones
    assert torch.equal(out[:3], alone)
    with pytest.raises(ValueError, match="temperature"):
        Sampler(0.0)
