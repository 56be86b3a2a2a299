"""Numeric-aware losses: CE plus EMD, NTIL, MMD, Smooth-MMD or NTL-MSE on number tokens."""

from jobs.losses.core import BatchCounts, LossOutput, NumericLoss, build_loss
from jobs.losses.hf import compute_loss_func, fused_compute_loss_func, shift_labels
from jobs.losses.vocab import NoNumericTokensError, NumericVocab

__all__ = [
    "BatchCounts",
    "LossOutput",
    "NoNumericTokensError",
    "NumericLoss",
    "NumericVocab",
    "build_loss",
    "compute_loss_func",
    "fused_compute_loss_func",
    "shift_labels",
]
