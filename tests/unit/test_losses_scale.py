"""Multi-digit number tokens: the distance terms stay bounded at their defaults.

With 1-3 digit tokens (LLaMA-3) and larger, |a - b| reaches the value range and NTL-MSE
its square, so the numeric term outweighed cross entropy by orders of magnitude. The
default (`distance: auto`) measures distances on log(1 + v) once a token has several digits.
"""

from __future__ import annotations

import math

import pytest
import torch

from jobs.losses import NumericVocab, build_loss
from jobs.losses.core import value_scale
from jobs.spec import LossSpec

# Token ids 0..1002: every value 0..999, then 10^4, 10^5 and 10^6.
VALUES = [float(v) for v in range(1000)] + [1e4, 1e5, 1e6]
BIG = NumericVocab(list(range(len(VALUES))), VALUES)
V = len(VALUES) + 5  # a few non-numeric tokens above the numeric ones
LOG_MAX = math.log1p(1e6)


def worst_case() -> tuple[torch.Tensor, torch.Tensor]:
    """Single-token numbers (ignored labels between them), each prediction certain of the
    value farthest from its target: logits [2, 7, V], labels [2, 7]."""
    targets = torch.tensor([[0, 0, 1002, 0, 1, 0, 999], [1002, 0, 0, 0, 500, 0, 1001]])
    far = torch.where(targets >= 1000, 0, 1002)
    logits = torch.full((2, 7, V), -30.0)
    logits.scatter_(-1, far.unsqueeze(-1), 30.0)
    labels = targets.clone()
    labels[:, 1::2] = -100
    return logits, labels


@pytest.mark.parametrize(
    ("name", "bound"),
    [
        ("emd", LOG_MAX),
        ("ntl_mse", LOG_MAX**2),
        # NTIL: position-weighted EMD (single-token numbers: weight 1) + α·relative (≤ 1)
        # + β·magnitude (≤ log(1 + 10^6)).
        ("ntil", LOG_MAX + 0.2 * 1.0 + 0.2 * LOG_MAX),
    ],
)
def test_numeric_term_is_bounded_for_values_up_to_a_million(name: str, bound: float) -> None:
    logits, labels = worst_case()
    spec = LossSpec(name=name, ntil_value="expectation")
    out = build_loss(spec, BIG)(logits, labels)
    assert math.isfinite(out.numeric.item())
    assert 0.5 * bound < out.numeric.item() <= bound * (1 + 1e-5)
    # The absolute scale on the same inputs is what blew training up: ~10^6 (MSE ~10^12).
    absolute = build_loss(spec.model_copy(update={"distance": "absolute"}), BIG)
    assert absolute(logits, labels).numeric.item() > 1e5
    # Gradients are finite and no larger than the bounded term allows.
    grad_in = logits.clone().requires_grad_()
    build_loss(spec, BIG)(grad_in, labels).numeric.backward()
    assert grad_in.grad is not None and torch.isfinite(grad_in.grad).all()


def test_auto_keeps_absolute_distances_for_single_digit_vocabularies() -> None:
    digits = [float(v) for v in range(10)]
    assert value_scale(LossSpec(name="emd"), digits) == "absolute"
    assert value_scale(LossSpec(name="emd"), [*digits, 10.0]) == "log"
    assert value_scale(LossSpec(name="emd", distance="absolute"), VALUES) == "absolute"
    assert value_scale(LossSpec(name="emd", distance="log"), digits) == "log"
