"""The Hugging Face seam: `Trainer(compute_loss_func=compute_loss_func(spec, tokenizer))`.

HF passes unshifted labels (labels[t] is the token at t) and, when it accumulates
gradients, `num_items_in_batch` = the target-token count of the whole accumulated batch.
The function shifts the labels itself and normalises every term by that count, so
accumulating micro-batches gives the same gradient as one large batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from jobs.losses.core import build_loss
from jobs.losses.fused import IGNORE
from jobs.losses.vocab import HasVocab, NumericVocab
from jobs.spec import LossSpec

LossFunc = Callable[..., torch.Tensor]


def shift_labels(labels: torch.Tensor) -> torch.Tensor:
    """[B, T] HF labels → [B, T] aligned targets: position t predicts token t+1.

    The labels move instead of the logits, so the [B, T, V] logits are never copied.
    """
    return F.pad(labels[:, 1:], (0, 1), value=IGNORE)


def compute_loss_func(spec: LossSpec, tokenizer: HasVocab) -> LossFunc:
    loss = build_loss(spec, NumericVocab.from_tokenizer(tokenizer))

    def compute(outputs: Any, labels: torch.Tensor, num_items_in_batch: Any = None) -> torch.Tensor:
        logits = outputs["logits"] if isinstance(outputs, Mapping) else outputs.logits
        module = loss.to(logits.device)
        return module(logits, shift_labels(labels), num_items_in_batch).total

    return compute
