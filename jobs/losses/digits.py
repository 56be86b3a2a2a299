"""The digit-level terms: DEL (Digit Entropy Loss) and DIST2 (a distance-smoothed target).

Both act on the ten digit logits of every position whose target is a digit, and weigh each
digit by its place in its number. They are defined on single-digit tokens only: `NumericLoss`
refuses them for a vocabulary whose number tokens are not exactly the digits 0-9 (the slice
is then [M, 10], one column per digit, in token-id order; `Geometry.values` says which).

DEL (arXiv 2605.20369): per digit position i and class c, the binary cross entropy with
logits of z_ic against onehot(y_i)_c, weighed by the class's own softmax probability p_ic
(over the ten digits; the gradient flows through it) and the digit's place weight w_i:

    del = 0.01 · Σ_i Σ_c w_i p_ic BCE(z_ic, onehot_ic) / (digit positions · 10)

A number is a run of consecutive targets that are digits or the decimal point; an integer
digit with k integer digits to its right weighs 2(k + 1); the m-th digit after the run's
first decimal point (m = 1, 2, ...) weighs 1.02^−(m + 1); the point has no term.

DIST2 (ICLR 2026): per digit position, KL(t ‖ softmax(z)) with t_d = softmax_d(−(y − d)²),
times (k + 1) for a digit with k digits to its right in its run of consecutive digit
targets (a decimal point splits a number into two runs); the mean over digit positions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from jobs.losses.catalog import LossConfig
from jobs.losses.runs import RunIndex
from jobs.losses.terms import Geometry, Part, SliceBatch, one_hot, register_term

# DEL's constants, as its authors define them.
DEL_SCALE = 0.01
DEL_FRACTION_BASE = 1.02


def del_place_weights(s: SliceBatch) -> torch.Tensor:
    """[M] float32 DEL's w_i: 2(k + 1) for integer digits, 1.02^−(m + 1) after the point."""
    index = RunIndex.of(s.is_num | s.is_point, s.row_first)
    after_point = index.upto(s.is_point.long()) > 0  # [M] a point precedes me in my run
    integer = s.is_num & ~after_point
    fraction = s.is_num & after_point
    k = index.after(integer.long()).float()  # integer digits to my right
    m = index.upto(fraction.long()).float()  # 1 for the first digit after the point
    w_int = 2.0 * (k + 1.0)
    w_frac = torch.pow(DEL_FRACTION_BASE, -(m + 1.0))
    return torch.where(integer, w_int, torch.where(fraction, w_frac, 0.0))


@register_term("del")
def del_term(s: SliceBatch, g: Geometry, c: LossConfig) -> dict[str, Part]:
    logits = s.logits  # [M, 10]
    target = one_hot(s.slot, logits.shape[-1], logits)  # [M, 10]
    bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")  # [M, 10]
    per_position = (torch.softmax(logits, dim=-1) * bce).sum(-1) * del_place_weights(s)
    # The mean over the 10 classes here; over digit positions by the caller (numeric_token).
    total = s.masked_sum(per_position) * (DEL_SCALE / logits.shape[-1])
    return {"del": Part(total, "numeric_token", 1.0)}


@register_term("dist2")
def dist2_term(s: SliceBatch, g: Geometry, c: LossConfig) -> dict[str, Part]:
    index = RunIndex.of(s.is_num, s.row_first)
    place = index.after(s.is_num.long()).float() + 1.0  # [M] k + 1
    y = g.values.index_select(0, s.slot)  # [M] target digit
    log_t = torch.log_softmax(-((y[:, None] - g.values[None, :]) ** 2), dim=-1)  # [M, 10]
    log_q = torch.log_softmax(s.logits, dim=-1)
    kl = (log_t.exp() * (log_t - log_q)).sum(-1)  # [M]
    return {"dist2": Part(s.masked_sum(kl * place), "numeric_token", 1.0)}
