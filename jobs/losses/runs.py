"""Numbers as runs of consecutive targets, indexed without a host sync.

A run is a maximal stretch of consecutive member positions (numeric targets for NTIL, digits
or the decimal point for DEL) that never crosses a sequence boundary. All bookkeeping uses
fixed-size buffers of M+1 slots (run ids 0..R-1, slot M collects the non-members),
cumulative sums and scatters: no data-dependent shapes, no `.item()`, no Python loop over
positions.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class RunIndex(NamedTuple):
    """Where each of M positions sits in its run (`member` [M] bool says who is in one)."""

    member: torch.Tensor  # [M] bool
    slot: torch.Tensor  # [M] long run id, M for non-members
    first: torch.Tensor  # [M] long position of my run's first member (clamped for others)
    starts: torch.Tensor  # [M] bool, first member of a run

    @classmethod
    def of(cls, member: torch.Tensor, row_first: torch.Tensor) -> RunIndex:
        """member, row_first: [M] bool (row_first: a sequence's first position)."""
        m = member.numel()
        pos = torch.arange(m, device=member.device)
        prev = torch.cat([member.new_zeros(1), member[:-1]]) & ~row_first
        starts = member & ~prev
        slot = torch.where(member, torch.cumsum(starts.long(), 0) - 1, m)  # [M] in 0..M
        first = torch.full((m + 1,), m, dtype=torch.long, device=pos.device)
        first.scatter_reduce_(0, slot, pos, reduce="amin")
        return cls(member, slot, first.index_select(0, slot).clamp(max=m - 1), starts)

    def upto(self, counts: torch.Tensor) -> torch.Tensor:
        """[M] Σ counts over my run's positions up to and including mine (counts [M] long,
        zero outside runs)."""
        running = torch.cumsum(counts, 0)
        return running - running.index_select(0, self.first) + counts.index_select(0, self.first)

    def total(self, counts: torch.Tensor) -> torch.Tensor:
        """[M] Σ counts over my whole run (counts [M] long)."""
        sums = torch.zeros(self.slot.numel() + 1, dtype=counts.dtype, device=counts.device)
        return sums.scatter_add_(0, self.slot, counts).index_select(0, self.slot)

    def after(self, counts: torch.Tensor) -> torch.Tensor:
        """[M] Σ counts over my run's positions strictly after mine."""
        return self.total(counts) - self.upto(counts)


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
    A run ends at any non-numeric label ('.' included).
    """
    m = is_num.numel()
    index = RunIndex.of(is_num, row_first)
    tokens_after = index.after(is_num.long())
    # A token's place value: 10 ** (digits of the tokens to its right within its run).
    place = torch.pow(10.0, index.after(torch.where(is_num, lengths, 0)).to(torch.float64))

    def assemble(values: torch.Tensor) -> torch.Tensor:
        contrib = torch.where(is_num, values.to(torch.float64) * place, 0.0)
        return torch.zeros(m + 1, dtype=torch.float64, device=is_num.device).scatter_add(
            0, index.slot, contrib
        )

    valid = torch.arange(m + 1, device=is_num.device) < index.starts.sum()
    return Runs(assemble(predicted), assemble(target), valid, tokens_after.float())
