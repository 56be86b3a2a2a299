"""NTIL's numbers: maximal runs of consecutive numeric targets, assembled without a host sync.

A run never crosses a sequence boundary and ends at any non-numeric label ('.' included).
All bookkeeping uses fixed-size buffers of M+1 slots (run ids 0..R-1, slot M collects the
non-numeric positions), cumulative sums and scatters: no data-dependent shapes, no
`.item()`, no Python loop over positions.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class Runs(NamedTuple):
    x: torch.Tensor  # [M+1] float64 predicted number of each run
    y: torch.Tensor  # [M+1] float64 target number of each run
    valid: torch.Tensor  # [M+1] bool, slot holds a real run
    tokens_after: torch.Tensor  # [M] float32, n − i − 1 for the i-th token of an n-token run


def run_values(
    is_num: torch.Tensor,
    row_first: torch.Tensor,
    *,
    predicted: torch.Tensor,
    target: torch.Tensor,
    lengths: torch.Tensor,
) -> Runs:
    """Numbers from per-token values, place values taken from the *target* digit lengths.

    is_num, row_first: [M] bool; predicted, target: [M] token values; lengths: [M] long.
    """
    m = is_num.numel()
    pos = torch.arange(m, device=is_num.device)
    prev_num = torch.cat([is_num.new_zeros(1), is_num[:-1]]) & ~row_first
    start = is_num & ~prev_num  # [M] first token of a run
    run_id = torch.cumsum(start.long(), 0) - 1
    slot = torch.where(is_num, run_id, m)  # [M] in 0..M

    count = torch.zeros(m + 1, dtype=torch.long, device=pos.device)
    count.scatter_add_(0, slot, is_num.long())
    first = torch.full((m + 1,), m, dtype=torch.long, device=pos.device)
    first.scatter_reduce_(0, slot, pos, reduce="amin")
    first_of_mine = first.index_select(0, slot).clamp(max=m - 1)  # [M] start of my run
    tokens_after = count.index_select(0, slot) - (pos - first_of_mine) - 1

    # Digits to the right of each token within its run = the run's total length minus the
    # inclusive running length; the run's running length is a global cumsum minus its base.
    digits = torch.where(is_num, lengths, 0)
    running = torch.cumsum(digits, 0)
    base = running.index_select(0, first_of_mine) - digits.index_select(0, first_of_mine)
    total = torch.zeros(m + 1, dtype=torch.long, device=pos.device)
    total.scatter_add_(0, slot, digits)
    shift = total.index_select(0, slot) - (running - base)  # [M]
    place = torch.pow(10.0, shift.to(torch.float64))

    def assemble(values: torch.Tensor) -> torch.Tensor:
        contrib = torch.where(is_num, values.to(torch.float64) * place, 0.0)
        return torch.zeros(m + 1, dtype=torch.float64, device=pos.device).scatter_add(
            0, slot, contrib
        )

    n_runs = start.sum()
    valid = torch.arange(m + 1, device=pos.device) < n_runs
    return Runs(assemble(predicted), assemble(target), valid, tokens_after.float())
