"""float32 master weights for a model held in bfloat16 (`train.precision: bf16_weights`).

The model's parameters, activations and gradients are bfloat16, so forward and backward run
on the CPU's or GPU's bf16 units without autocast's casts. The optimizer never sees them: it
steps float32 copies (its AdamW moments are float32 like them), and each step's result is
rounded back into the model. An update below bfloat16's spacing (2^-8 of the weight) thus
accumulates in the copy instead of vanishing, which plain bf16 AdamW would lose.

A resumed run rebuilds the copies from the checkpoint's bfloat16 weights: the bits below
bf16's precision are dropped once, at the resume.
"""

from __future__ import annotations

import torch


class MasterWeights:
    """float32 copies of `params` (bf16), for an optimizer built over `self.params`."""

    def __init__(self, params: list[torch.nn.Parameter]):
        self.model_params = params
        # [same shapes], float32, on the parameters' device; leaves the optimizer owns.
        self.params = [torch.nn.Parameter(p.detach().float().clone()) for p in params]

    @torch.no_grad()
    def pull_grads(self) -> None:
        """The model's bf16 gradients into the copies, as float32 (None stays None)."""
        for param, master in zip(self.model_params, self.params, strict=True):
            master.grad = None if param.grad is None else param.grad.float()
            param.grad = None

    @torch.no_grad()
    def push_weights(self) -> None:
        """The copies, rounded to bf16, into the model."""
        for param, master in zip(self.model_params, self.params, strict=True):
            param.copy_(master)
