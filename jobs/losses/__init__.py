"""Numeric-aware losses: CE plus EMD, NTIL, MMD, Smooth-MMD or NTL-MSE on number tokens.

This package imports torch and the standard library only. Its exports load on first use, so
`jobs.losses.catalog` (the loss names and parameters, no torch) can be read by the control
plane without loading torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobs.losses.catalog import LossConfig
    from jobs.losses.core import BatchCounts, LossOutput, NumericLoss, build_loss
    from jobs.losses.hf import compute_loss_func, fused_compute_loss_func, shift_labels
    from jobs.losses.vocab import NoNumericTokensError, NumericVocab

_HOMES = {
    "LossConfig": "catalog",
    "BatchCounts": "core",
    "LossOutput": "core",
    "NumericLoss": "core",
    "build_loss": "core",
    "compute_loss_func": "hf",
    "fused_compute_loss_func": "hf",
    "shift_labels": "hf",
    "NoNumericTokensError": "vocab",
    "NumericVocab": "vocab",
}
__all__ = [
    "BatchCounts",
    "LossConfig",
    "LossOutput",
    "NoNumericTokensError",
    "NumericLoss",
    "NumericVocab",
    "build_loss",
    "compute_loss_func",
    "fused_compute_loss_func",
    "shift_labels",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"jobs.losses.{_HOMES[name]}"), name)
