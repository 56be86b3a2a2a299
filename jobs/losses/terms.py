"""The numeric terms, one registered function each, on the numeric slice only.

Every term sees a `SliceBatch`: the float32 numeric logits [M, N] of all M positions, the
target's slot in the numeric vocabulary [M] and which positions have a numeric target [M].
It returns sums (never means: the caller owns normalisation, so accumulation stays exact)
as `Part`s, each a sum over numeric target tokens or over whole numbers (runs). Non-numeric
positions are masked with `torch.where`, never dropped by boolean indexing (that would sync
with the host), except where `number_rows` says the device has no host to sync with (CPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch

from jobs.losses.catalog import LOSSES, LossConfig
from jobs.losses.runs import run_values


class Part(NamedTuple):
    total: torch.Tensor  # [] sum over numeric target tokens, or over numbers (runs)
    level: Literal["numeric_token", "number"]  # what it is averaged over
    weight: float | None  # its share of the numeric loss; None: reported only


@dataclass(frozen=True)
class SliceBatch:
    logits: torch.Tensor  # [M, N] float32 numeric logits
    slot: torch.Tensor  # [M] long, the target's numeric slot (0 where not numeric)
    is_num: torch.Tensor  # [M] bool, target is a numeric token
    row_first: torch.Tensor  # [M] bool, first position of its sequence (runs never cross it)
    is_point: torch.Tensor  # [M] bool, target is the decimal point (DEL's numbers include it)

    def masked_sum(self, per_position: torch.Tensor) -> torch.Tensor:
        return torch.where(self.is_num, per_position, 0.0).sum()


@dataclass(frozen=True)
class Geometry:
    """Per-vocabulary constants the terms share (registered buffers of the loss module)."""

    values: torch.Tensor  # [N] float32
    scaled: torch.Tensor  # [N] float32 values on the distance terms' scale (v or log(1+v))
    lengths: torch.Tensor  # [N] long digit lengths
    dist: torch.Tensor  # [N, N] float32 |s_i - s_j| of the scaled values, squashed when asked
    kernel: torch.Tensor  # [N, N] float32 K_ij from |v_i - v_j| (squashed when asked)
    kernel_rows: torch.Tensor  # [N] float32 Σ_j K_ij (the D of Smooth-MMD)


Term = Callable[[SliceBatch, Geometry, LossConfig], dict[str, Part]]
# Every term by loss name: complete once jobs.losses.core (which imports each term's
# module: this one, digits.py, number_level.py) is imported.
TERMS: dict[str, Term] = {}


def register_term(name: str) -> Callable[[Term], Term]:
    # A term is selected by its loss's name, so a term no declared loss names could never
    # run: refuse it here instead of registering it (jobs/losses/catalog.py declares them).
    if name not in LOSSES:
        raise ValueError(f"numeric term {name!r} is not a loss declared in jobs.losses.catalog")

    def add(fn: Term) -> Term:
        if name in TERMS:
            raise ValueError(f"numeric term {name!r} is registered twice")
        TERMS[name] = fn
        return fn

    return add


def _emd(s: SliceBatch, g: Geometry) -> torch.Tensor:
    """[M] Σ_k p_k d(k, y): O(M·N), the target's distance row gathered, no matmul."""
    p = torch.softmax(s.logits, dim=-1)
    return (p * g.dist.index_select(0, s.slot)).sum(-1)


def one_hot(index: torch.Tensor, n: int, like: torch.Tensor) -> torch.Tensor:
    """[M] → [M, N] one-hot by comparison (F.one_hot checks its range: a host sync)."""
    return (torch.arange(n, device=index.device) == index.unsqueeze(-1)).to(like.dtype)


def number_rows(s: SliceBatch) -> torch.Tensor | None:
    """[R] the positions with a number target, on CPU; None on an accelerator.

    On CPU `nonzero` has no device to wait for; on an accelerator it would block the host
    for the count, so there every row is computed and masked afterwards instead.
    """
    return s.is_num.nonzero().squeeze(1) if s.logits.device.type == "cpu" else None


def _mmd_pieces(s: SliceBatch, g: Geometry) -> tuple[torch.Tensor, torch.Tensor]:
    """[M] rᵀKr and [M] rᵀ(D−K)r with r = p − onehot(y) kept explicit (fp32-stable).

    r @ K is O(M·N²): with LLaMA-3's N = 1,110 number tokens it is most of a CPU step if
    every position pays it, so where `number_rows` gives the numeric rows (a few % of M)
    only those are computed and scattered back.
    """
    rows = number_rows(s)
    logits = s.logits if rows is None else s.logits.index_select(0, rows)  # [R, N]
    slot = s.slot if rows is None else s.slot.index_select(0, rows)  # [R]
    p = torch.softmax(logits, dim=-1)
    r = p - one_hot(slot, p.shape[-1], p)  # [R, N]
    rkr = ((r @ g.kernel) * r).sum(-1)
    laplacian = (g.kernel_rows * r * r).sum(-1) - rkr
    if rows is None:
        return rkr, laplacian
    full = s.logits.new_zeros(s.logits.shape[0])  # [M]; rows without a number target: 0
    return full.index_copy(0, rows, rkr), full.index_copy(0, rows, laplacian)


@register_term("emd")
def emd_term(s: SliceBatch, g: Geometry, c: LossConfig) -> dict[str, Part]:
    return {"emd": Part(s.masked_sum(_emd(s, g)), "numeric_token", 1.0)}


@register_term("ntl_mse")
def ntl_mse_term(s: SliceBatch, g: Geometry, c: LossConfig) -> dict[str, Part]:
    expected = torch.softmax(s.logits, dim=-1) @ g.scaled  # [M]
    err = (expected - g.scaled.index_select(0, s.slot)) ** 2
    return {"mse": Part(s.masked_sum(err), "numeric_token", 1.0)}


@register_term("mmd")
def mmd_term(s: SliceBatch, g: Geometry, c: LossConfig) -> dict[str, Part]:
    rkr, _ = _mmd_pieces(s, g)
    return {"mmd": Part(s.masked_sum(rkr), "numeric_token", 1.0)}


@register_term("smmd")
def smmd_term(s: SliceBatch, g: Geometry, c: LossConfig) -> dict[str, Part]:
    rkr, laplacian = _mmd_pieces(s, g)
    smooth = c.number("smooth_weight") * laplacian
    return {
        "smmd": Part(s.masked_sum(torch.relu(rkr + smooth)), "numeric_token", 1.0),
        "mmd": Part(s.masked_sum(rkr), "numeric_token", None),
        "smooth": Part(s.masked_sum(smooth), "numeric_token", None),
    }


def _token_values(s: SliceBatch, g: Geometry, c: LossConfig) -> torch.Tensor:
    """[M] each position's predicted token value: straight-through Gumbel or expectation."""
    if c.word("ntil_value") == "expectation":
        return torch.softmax(s.logits, dim=-1) @ g.values
    noisy = s.logits
    if c.number("gumbel_noise") > 0:
        uniform = torch.rand_like(noisy).clamp_(1e-10, 1.0 - 1e-7)
        noisy = noisy - c.number("gumbel_noise") * torch.log(-torch.log(uniform))
    soft = torch.softmax(noisy / c.number("gumbel_tau"), dim=-1)
    hard = one_hot(noisy.argmax(-1), soft.shape[-1], soft)
    # Forward: the hard pick's value; backward: the tempered softmax's gradient.
    return (hard - soft.detach() + soft) @ g.values


@register_term("ntil")
def ntil_term(s: SliceBatch, g: Geometry, c: LossConfig) -> dict[str, Part]:
    runs = run_values(
        s.is_num,
        s.row_first,
        predicted=_token_values(s, g, c),
        target=g.values.index_select(0, s.slot),
        lengths=g.lengths.index_select(0, s.slot),
    )
    weights = (1.0 + c.number("sigma")) ** runs.tokens_after  # [M] (1+σ)^(n−i−1)
    hi = torch.maximum(runs.x, runs.y)
    lo = torch.minimum(runs.x, runs.y)
    relative = (runs.x - runs.y).abs() / (hi + 1.0)  # [R] float64
    magnitude = torch.log((hi + 1.0) / (lo + 1.0))
    return {
        "emd": Part(s.masked_sum(weights * _emd(s, g)), "numeric_token", 1.0),
        "relative": Part(
            torch.where(runs.valid, relative, 0.0).sum().float(), "number", c.number("alpha")
        ),
        "magnitude": Part(
            torch.where(runs.valid, magnitude, 0.0).sum().float(), "number", c.number("beta")
        ),
    }
