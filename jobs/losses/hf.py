"""The Hugging Face seam: `Trainer(compute_loss_func=compute_loss_func(spec, tokenizer))`.

`spec` is a `LossConfig` (`LossConfig.make("smmd", weight=0.5)`): torch only, no pydantic.

HF passes unshifted labels (labels[t] is the token at t) and, when it accumulates
gradients, `num_items_in_batch` = the target-token count of the whole accumulated batch.
The function shifts the labels itself and normalises every term by that count, so
accumulating micro-batches gives the same gradient as one large batch.

`fused_compute_loss_func(spec, tokenizer, model)` is the same loss without the [tokens,
vocabulary] logits (jobs/losses/linear.py): in training mode the model's own head projects
no position and the loss is computed from the last hidden state and the head's weight in
chunks; evaluation (no gradient) keeps ordinary logits, so `compute_metrics` still sees them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from jobs.losses.core import build_loss
from jobs.losses.fused import IGNORE
from jobs.losses.head import fusable_head, hidden_hook, skip_logits
from jobs.losses.vocab import HasVocab, NumericVocab

LossFunc = Callable[..., torch.Tensor]
log = logging.getLogger(__name__)


def shift_labels(labels: torch.Tensor) -> torch.Tensor:
    """[B, T] HF labels → [B, T] aligned targets: position t predicts token t+1.

    The labels move instead of the logits, so the [B, T, V] logits are never copied.
    """
    return F.pad(labels[:, 1:], (0, 1), value=IGNORE)


def compute_loss_func(spec: object, tokenizer: HasVocab) -> LossFunc:
    """spec: a `LossConfig` (or the service's LossSpec); no pydantic needed."""
    loss = build_loss(spec, NumericVocab.from_tokenizer(tokenizer))

    def compute(outputs: Any, labels: torch.Tensor, num_items_in_batch: Any = None) -> torch.Tensor:
        logits = outputs["logits"] if isinstance(outputs, Mapping) else outputs.logits
        module = loss.to(logits.device)
        return module(logits, shift_labels(labels), num_items_in_batch).total

    return compute


def fused_compute_loss_func(spec: object, tokenizer: HasVocab, model: torch.nn.Module) -> LossFunc:
    """`compute_loss_func` for `Trainer(model=model, ...)` that never materialises the logits.

    Same values and gradients as `compute_loss_func` (same normalisation by
    `num_items_in_batch`). Installs two hooks on `model` for its lifetime: one that asks its
    forward for no logits while training with gradients, one that keeps the last hidden
    state. Falls back to the logits path (with a warning at build time) when the model's head
    is not a plain linear layer or its logits are rescaled or soft-capped."""
    loss = build_loss(spec, NumericVocab.from_tokenizer(tokenizer))
    head = fusable_head(model)
    if head is None:
        log.warning("fused_compute_loss_func: this model's head needs its logits; using them")
        return compute_loss_func(spec, tokenizer)
    kept: list[torch.Tensor] = []  # the last hidden state [B, T, d] of the latest forward
    hidden_hook(model, kept)

    def no_logits(module: torch.nn.Module, args: Any, kwargs: dict[str, Any]) -> Any:
        if module.training and torch.is_grad_enabled():
            device = head.weight.device
            kwargs = {**kwargs, **skip_logits(device)}
        kept.clear()  # one forward's hidden state at a time
        return args, kwargs

    model.register_forward_pre_hook(no_logits, with_kwargs=True)

    def compute(outputs: Any, labels: torch.Tensor, num_items_in_batch: Any = None) -> torch.Tensor:
        logits = outputs["logits"] if isinstance(outputs, Mapping) else outputs.logits
        module = loss.to(head.weight.device)
        target = shift_labels(labels)
        if logits.shape[1] == labels.shape[1] or not kept:  # evaluation: real logits
            return module(logits, target, num_items_in_batch).total
        hidden = kept[-1]
        return module.forward_hidden(
            hidden, head.weight, target, num_items_in_batch, bias=head.bias
        ).total

    return compute
