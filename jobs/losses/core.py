"""`build_loss(spec, vocab)`: cross entropy plus one registered numeric term, as a module.

    total = ce + λ · numeric                          (mixing="additive")
    total = ce + λ · stopgrad(ce / numeric) · numeric (mixing="ratio", the NTIL authors' mix)

Normalisation is explicit so that gradient accumulation is exact (see `BatchCounts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

import torch

from jobs.losses import digits, number_level  # noqa: F401  (each module registers its terms)
from jobs.losses.catalog import LossConfig, loss_names, multi_digit_losses
from jobs.losses.fused import IGNORE, fused_cross_entropy
from jobs.losses.linear import linear_cross_entropy
from jobs.losses.terms import TERMS, Geometry, SliceBatch
from jobs.losses.vocab import NumericVocab


class LossOutput(NamedTuple):
    total: torch.Tensor  # [] what backward is called on
    ce: torch.Tensor  # [] token cross entropy
    numeric: torch.Tensor  # [] the numeric term before λ (0 for "ce")
    parts: dict[str, torch.Tensor]  # each term by name, normalised like `numeric`


def _starts_and_numeric(labels: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """labels [B, T] → (numeric mask [B, T], run-start mask [B, T])."""
    is_num = torch.isin(labels, ids)
    prev = torch.nn.functional.pad(is_num[:, :-1], (1, 0), value=False)
    return is_num, is_num & ~prev


class BatchCounts(NamedTuple):
    """Exact denominators for a whole (accumulated) optimizer step.

    tokens: non-ignored targets (CE); numeric: numeric targets (the terms' "numeric_token"
    parts); runs: numbers, i.e. maximal runs of numeric targets (NTIL's "number" parts).
    """

    tokens: torch.Tensor
    numeric: torch.Tensor
    runs: torch.Tensor

    @classmethod
    def of(cls, labels: torch.Tensor | Sequence[torch.Tensor], vocab: NumericVocab) -> BatchCounts:
        """Counts over aligned labels [B, T] (or the list of a step's micro-batches)."""
        batches = [labels] if isinstance(labels, torch.Tensor) else list(labels)
        ids = vocab.ids_tensor(batches[0].device)
        tokens = numeric = runs = torch.zeros((), dtype=torch.long, device=ids.device)
        for lab in batches:
            is_num, starts = _starts_and_numeric(lab, ids)
            tokens = tokens + (lab != IGNORE).sum()
            numeric = numeric + is_num.sum()
            runs = runs + starts.sum()
        return cls(tokens, numeric, runs)


def _distances(values: torch.Tensor, squash: float | None) -> torch.Tensor:
    """[N, N] |v_i − v_j|; squashed: non-zero d ↦ 1 + (d − dmin)(f − 1)/(dmax − dmin)."""
    dist = (values[:, None] - values[None, :]).abs()
    if squash is None:
        return dist
    nonzero = dist > 0
    if not bool(nonzero.any()):
        return dist
    dmin, dmax = dist[nonzero].min(), dist[nonzero].max()
    span = (dmax - dmin).clamp(min=torch.finfo(dist.dtype).tiny)
    squashed = 1.0 + (dist - dmin) * (squash - 1.0) / span
    return torch.where(nonzero, squashed, 0.0)


def value_scale(spec: object, values: Sequence[float]) -> Literal["absolute", "log"]:
    """The distance terms' scale: `auto` is log once any number token has several digits.

    With LLaMA-3-style 1-3 digit tokens |a - b| reaches 999 (NTL-MSE: ~10^6), the numeric
    term outweighs cross entropy by orders of magnitude, gradient clipping then shrinks
    cross entropy's share of every step to nothing and the model never learns to end its
    answer. log(1 + v) keeps every distance below log(1 + max value) (≈ 6.9 for 999)."""
    distance = LossConfig.of(spec).word("distance")
    if distance == "auto":
        return "log" if max(values) > 9 else "absolute"
    return "log" if distance == "log" else "absolute"


def _kernel(dist: torch.Tensor, kind: str, bandwidth: float) -> torch.Tensor:
    if kind == "gaussian":
        return torch.exp(-(dist**2) / (2.0 * bandwidth**2))
    return torch.exp(-dist / bandwidth)


class NumericLoss(torch.nn.Module):
    """forward(logits [B, T, V], labels [B, T] aligned, num_items_in_batch) → LossOutput."""

    # Registered buffers (declared for the type checker).
    ids: torch.Tensor
    values: torch.Tensor
    lengths: torch.Tensor
    dist: torch.Tensor
    scaled: torch.Tensor
    kernel: torch.Tensor
    kernel_rows: torch.Tensor

    def __init__(self, spec: object, vocab: NumericVocab):
        """spec: a LossConfig, or anything `LossConfig.of` reads (the service's LossSpec)."""
        super().__init__()
        config = LossConfig.of(spec)
        if config.name != "ce" and config.name not in TERMS:
            raise ValueError(f"loss.name: unknown loss {config.name!r}; known: {loss_names()}")
        if config.decl is not None and config.decl.digit_level and not vocab.digits_only:
            raise ValueError(
                f"loss.name: {config.name} is defined on single-digit tokens (0-9, one token "
                f"each); this tokenizer has {vocab.size} number tokens of up to "
                f"{max(vocab.digit_lengths)} digits. Use a digit tokenizer, or a loss that "
                f"handles multi-digit tokens: {', '.join(multi_digit_losses())}"
            )
        self.vocab = vocab
        # Built once (in float64, stored float32); .to(device) moves them with the module.
        values = torch.tensor(vocab.values, dtype=torch.float64)
        self.scale = value_scale(config, vocab.values)
        squash = config.optional_number("squash")
        scaled = torch.log1p(values) if self.scale == "log" else values
        bandwidth = config.number("bandwidth")
        kernel = _kernel(_distances(values, squash), config.word("kernel"), bandwidth)
        self.register_buffer("ids", vocab.ids_tensor())
        self.register_buffer("values", values.float())
        self.register_buffer("scaled", scaled.float())
        self.register_buffer("lengths", vocab.lengths_tensor())
        self.register_buffer("dist", _distances(scaled, squash).float())
        self.register_buffer("kernel", kernel.float())
        self.register_buffer("kernel_rows", kernel.sum(1).float())
        smooth = config.values["smooth_weight"]
        alpha = 1.0 / (2.0 * float(kernel.sum(1).mean())) if smooth == "auto" else smooth
        # The terms read the resolved α.
        self.config = config.with_values(smooth_weight=alpha)

    def _check(self, scores: torch.Tensor, labels: torch.Tensor, vocab: int, what: str) -> None:
        """scores: logits [B, T, V] or hidden states [B, T, d] (`what` names them)."""
        if scores.dim() != 3 or labels.shape != scores.shape[:2]:
            raise ValueError(
                f"expected {what} [B, T, ·] and labels [B, T]; got {tuple(scores.shape)} "
                f"and {tuple(labels.shape)}"
            )
        if labels.dtype != torch.long:
            raise ValueError(f"labels must be int64 token ids, got {labels.dtype}")
        if not scores.is_floating_point():
            raise ValueError(f"{what} must be floating point, got {scores.dtype}")
        if self.vocab.token_ids[-1] >= vocab:
            raise ValueError(
                f"numeric token id {self.vocab.token_ids[-1]} is outside the logits' "
                f"vocabulary of {vocab}: wrong tokenizer for this model?"
            )

    def _counts(self, labels: torch.Tensor, given: object) -> BatchCounts:
        if given is None:
            return BatchCounts.of(labels, self.vocab)
        if isinstance(given, BatchCounts):
            return given
        if isinstance(given, int | torch.Tensor):
            # HF convention: one token count for the whole accumulated batch; every term
            # is then a per-target-token sum, the only exact choice with that information.
            n = torch.as_tensor(given, device=labels.device)
            return BatchCounts(n, n, n)
        raise TypeError(f"num_items_in_batch: expected int, Tensor or BatchCounts, got {given!r}")

    def forward(
        self,
        logits: torch.Tensor,
        labels: torch.Tensor,
        num_items_in_batch: int | torch.Tensor | BatchCounts | None = None,
    ) -> LossOutput:
        self._check(logits, labels, logits.shape[-1], "logits")
        batch, time, vocab = logits.shape
        ce_sum, numeric_logits = fused_cross_entropy(
            logits.reshape(batch * time, vocab), labels.reshape(-1), self.ids
        )
        return self._combine(ce_sum, numeric_logits, labels, num_items_in_batch)

    def forward_hidden(
        self,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        labels: torch.Tensor,
        num_items_in_batch: int | torch.Tensor | BatchCounts | None = None,
        *,
        bias: torch.Tensor | None = None,
        rows: int | None = None,
    ) -> LossOutput:
        """The same loss from hidden states [B, T, d] and the LM head weight [V, d] (bias [V]),
        as if logits = hidden @ weight.T + bias, without ever holding [B·T, V] (see linear.py).
        `rows`: positions per chunk (default: ~64 Mi logits per chunk)."""
        self._check(hidden, labels, weight.shape[0], "hidden states")
        batch, time, width = hidden.shape
        ce_sum, numeric_logits = linear_cross_entropy(
            hidden.reshape(batch * time, width), weight, bias, labels.reshape(-1), self.ids, rows
        )
        return self._combine(ce_sum, numeric_logits, labels, num_items_in_batch)

    def _combine(
        self,
        ce_sum: torch.Tensor,
        numeric_logits: torch.Tensor,
        labels: torch.Tensor,
        num_items_in_batch: int | torch.Tensor | BatchCounts | None,
    ) -> LossOutput:
        """CE's sum [] and the numeric slice [B·T, N] → the normalised, mixed loss."""
        batch, time = labels.shape
        flat_labels = labels.reshape(-1)
        counts = self._counts(labels, num_items_in_batch)
        ce = ce_sum / counts.tokens.clamp(min=1).float()  # over every non-ignored target
        zero = ce_sum.new_zeros(())
        if self.config.name == "ce":
            return LossOutput(ce, ce, zero, {})

        # Slot of each target in the numeric slice: ids are sorted, so a binary search.
        safe = flat_labels.clamp(min=0)
        slot = torch.searchsorted(self.ids, safe).clamp(max=self.ids.numel() - 1)
        is_num = (flat_labels != IGNORE) & (self.ids.index_select(0, slot) == safe)
        row_first = torch.arange(batch * time, device=labels.device) % time == 0
        point = -1 if self.vocab.point_id is None else self.vocab.point_id  # -1: no label
        is_point = flat_labels == point  # [B·T]
        view = SliceBatch(numeric_logits, torch.where(is_num, slot, 0), is_num, row_first, is_point)
        geometry = Geometry(
            self.values, self.scaled, self.lengths, self.dist, self.kernel, self.kernel_rows
        )
        found = TERMS[self.config.name](view, geometry, self.config)

        # Each part is averaged over its level's count for the whole step.
        level_counts = {
            "numeric_token": counts.numeric.clamp(min=1).float(),
            "number": counts.runs.clamp(min=1).float(),
        }
        numeric = zero
        parts: dict[str, torch.Tensor] = {}
        for name, part in found.items():
            value = part.total / level_counts[part.level]
            if part.weight is not None:
                numeric = numeric + part.weight * value
            parts[name] = value
        weight = self.config.number("weight")
        if self.config.word("mixing") == "ratio":
            ratio = torch.where(numeric > 0, ce / numeric.clamp(min=1e-12), 0.0).detach()
            total = ce + weight * ratio * numeric
        else:
            total = ce + weight * numeric
        return LossOutput(total, ce, numeric, parts)


def build_loss(spec: object, vocab: NumericVocab) -> NumericLoss:
    """spec: a LossConfig, or anything with its attributes (jobs.spec.LossSpec)."""
    return NumericLoss(spec, vocab)
