"""NTL's number-level loss (`ntl_number`), as the `ntloss` package's `NumberLevelLoss`.

Each number token's predicted value is its expectation over the number tokens,
ŷ_i = Σ_j softmax(z_i)_j v_j; a number (a run of consecutive number targets, ended by any
other target, the decimal point included) is assembled with the target's place values,
x = Σ_i ŷ_i 10^(digits to the right of i); its loss is the symmetric relative error

    |x − y| / (|x| + |y| + ε)        (ε: float32's machine epsilon, ntloss's)

averaged over numbers. This is `NumberLevelLoss(tokenizer, reweigh=False)`, the ICML paper's
form (ntloss's default `reweigh=True` also mixes in the whole vocabulary's number mass,
which needs full-vocabulary softmax at every number and which its authors mark unrefined).
On multi-digit vocabularies (LLaMA-3's 0-999) the same formula runs over all number tokens,
with place values from the target tokens' digit lengths: numtune's extension.
"""

from __future__ import annotations

import torch

from jobs.losses.catalog import LossConfig
from jobs.losses.runs import run_values
from jobs.losses.terms import Geometry, Part, SliceBatch, register_term

EPS = torch.finfo(torch.float32).eps


@register_term("ntl_number")
def ntl_number_term(s: SliceBatch, g: Geometry, c: LossConfig) -> dict[str, Part]:
    runs = run_values(
        s.is_num,
        s.row_first,
        predicted=torch.softmax(s.logits, dim=-1) @ g.values,  # [M] expected token value
        target=g.values.index_select(0, s.slot),
        lengths=g.lengths.index_select(0, s.slot),
    )
    error = (runs.x - runs.y).abs() / (runs.x.abs() + runs.y.abs() + EPS)  # [M+1] float64
    return {"number": Part(torch.where(runs.valid, error, 0.0).sum().float(), "number", 1.0)}
