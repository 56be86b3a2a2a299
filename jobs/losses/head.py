"""Feeding the loss from the last hidden state instead of logits, where the model allows it.

A causal LM's logits are `lm_head(last_hidden_state)`; when that head is a plain
`nn.Linear` and nothing rescales or caps the logits, `NumericLoss.forward_hidden` gives the
same loss and gradients from the hidden states and the head's weight without the
[tokens, vocab] logits (jobs/losses/linear.py). The model is still called as usual (through
DDP or DeepSpeed wrappers, so their hooks run), with `logits_to_keep` set to no position so
its own head computes an empty [B, 0, V]; a forward hook on the base model keeps the hidden
states. Duck-typed on the Hugging Face API: this package imports only torch.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from jobs.losses.core import BatchCounts, LossOutput, NumericLoss

log = logging.getLogger(__name__)

# Config fields with which logits are not just lm_head(h) (Gemma 2/3's soft-capping, Cohere's
# logit_scale, Granite's logits_scaling): with any of them set, the materialised path runs.
LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")


def fusable_head(model: torch.nn.Module) -> torch.nn.Linear | None:
    """The model's LM head when logits are exactly head(last hidden state), else None."""
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    if type(head) is not torch.nn.Linear:  # a subclass (LoRA, quantised) may change the math
        return None
    config = getattr(model, "config", None)
    for name in LOGIT_TRANSFORMS:
        if getattr(config, name, None) not in (None, 1, 1.0):
            log.info("materialising logits: config.%s transforms them", name)
            return None
    forward = getattr(model, "forward", None)
    if forward is None or "logits_to_keep" not in inspect.signature(forward).parameters:
        return None
    if not isinstance(getattr(model, "base_model", None), torch.nn.Module):
        return None
    return head


def skip_logits(device: torch.device) -> dict[str, torch.Tensor]:
    """Forward kwargs with which the model's own head projects no position at all."""
    return {"logits_to_keep": torch.empty(0, dtype=torch.long, device=device)}


def hidden_hook(model: torch.nn.Module, kept: list[torch.Tensor]) -> Any:
    """Append the base model's last hidden state [B, T, d] to `kept` on every forward."""

    def keep(module: torch.nn.Module, args: Any, output: Any) -> None:
        found = getattr(output, "last_hidden_state", None)
        kept.append(found if isinstance(found, torch.Tensor) else output[0])

    base = model.base_model
    assert isinstance(base, torch.nn.Module)  # checked by fusable_head
    return base.register_forward_hook(keep)


@contextlib.contextmanager
def keep_hidden(model: torch.nn.Module) -> Iterator[list[torch.Tensor]]:
    """While open, every forward of `model` appends its last hidden state [B, T, d]."""
    kept: list[torch.Tensor] = []
    handle = hidden_hook(model, kept)
    try:
        yield kept
    finally:
        handle.remove()


class HeadLoss:
    """The training step's loss: fused from hidden states when `unwrapped`'s head allows.

    `model` (what is called) may be a DDP/DeepSpeed wrapper around `unwrapped`."""

    def __init__(self, loss: NumericLoss, unwrapped: torch.nn.Module, enabled: bool = True):
        self.loss = loss
        self.unwrapped = unwrapped
        self.head = fusable_head(unwrapped) if enabled else None
        log.info("loss from %s", "hidden states (fused LM head)" if self.head else "logits")

    @property
    def fused(self) -> bool:
        return self.head is not None

    def __call__(
        self,
        model: Callable[..., Any],
        inputs: Mapping[str, torch.Tensor],
        labels: torch.Tensor,
        counts: BatchCounts | torch.Tensor | int | None,
    ) -> LossOutput:
        """inputs: the model's keyword arguments; labels [B, T] aligned (already shifted)."""
        if self.head is None:
            return self.loss(model(**inputs).logits, labels, num_items_in_batch=counts)
        with keep_hidden(self.unwrapped) as kept:
            model(**inputs, **skip_logits(labels.device))
        return self.loss.forward_hidden(
            kept[-1], self.head.weight, labels, counts, bias=self.head.bias
        )
