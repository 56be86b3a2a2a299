"""LM head + cross entropy + numeric slice from hidden states, without the [M, V] logits.

The materialised path computes logits [M, V] = h Wᵀ (+ b), keeps them for the backward and
writes a second [M, V] gradient: at V = 151,936 that is 0.6 GB per 1,000 positions each.
Here the positions are processed `rows` at a time:

    logits_c [n, V] = h_c Wᵀ + b           (fp32 for the softmax, whatever the matmul dtype)
    ce_sum += Σ (logsumexp − target)        over non-ignored rows
    G_c [n, V] = softmax − onehot          (d ce_sum / d logits_c, in place in logits_c)
    grad_h[c] = G_c W,  grad_W += G_cᵀ h_c,  grad_b += Σ_rows G_c

The gradients are built in the forward and only scaled by d loss / d ce_sum in the backward
(one matmul pass instead of recomputing the logits; `bench/fused_linear.py` measures it).

The numeric terms need only the N numeric columns: the slice [M, N] = h W[ids]ᵀ + b[ids] is
an ordinary small linear layer under autograd, so the terms (and NTIL's runs across chunk
boundaries) see exactly what they see on the materialised path, and their gradient reaches
h and W through autograd. By linearity, d loss / d logits = CE's part + the slice's part at
the ids columns, which is what the two paths add up to.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from jobs.losses.fused import IGNORE

# Rows per chunk so that the one fp32 logits buffer holds 256 Mi elements (1 GiB) for any V:
# 1,766 rows at V = 151,936. Chunks of 441 rows made the three matmuls ~9 % slower than
# the unchunked ones (2 CPU threads); at ~2,000 rows the step matches the materialised one.
CHUNK_ELEMENTS = 1 << 28


def chunk_rows(vocab: int) -> int:
    return max(1, CHUNK_ELEMENTS // max(vocab, 1))


class _Grads(NamedTuple):
    hidden: torch.Tensor  # [M, d] d ce_sum / d h, in the compute dtype's accumulation (fp32)
    weight: torch.Tensor  # [V, d] fp32, summed over every chunk
    bias: torch.Tensor | None  # [V] fp32


def _compute_dtype(hidden: torch.Tensor, weight: torch.Tensor) -> torch.dtype:
    """The matmul dtype the materialised lm_head would use: autocast's, else the promotion."""
    device = hidden.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return torch.promote_types(hidden.dtype, weight.dtype)


def _chunked_ce(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    labels: torch.Tensor,
    rows: int,
    with_grads: bool,
) -> tuple[torch.Tensor, _Grads | None]:
    """(ce_sum [] fp32, its gradients or None). hidden [M, d], weight [V, d], labels [M]."""
    dtype = _compute_dtype(hidden, weight)
    # Cast once, then keep autocast out of the loop so it cannot re-cast W per chunk.
    h, w = hidden.to(dtype), weight.to(dtype)
    b = None if bias is None else bias.to(dtype)
    valid = labels != IGNORE  # [M]
    safe = torch.where(valid, labels, 0).unsqueeze(1)  # [M, 1]; ignored rows point at 0
    counted = valid.unsqueeze(1)  # [M, 1]
    scale = counted.float()  # [M, 1]: 1 where the row counts, else 0
    ce_sum = hidden.new_zeros((), dtype=torch.float32)
    grads = None
    if with_grads:
        grads = _Grads(
            torch.empty(h.shape, dtype=torch.float32, device=h.device),
            torch.zeros(w.shape, dtype=torch.float32, device=w.device),
            None if b is None else torch.zeros(b.shape, dtype=torch.float32, device=b.device),
        )
    # One [rows, V] fp32 buffer for every chunk: a fresh allocation per chunk would fault in
    # (and zero) up to 1 GiB of new pages each time.
    buffer = torch.empty((min(rows, h.shape[0]), w.shape[0]), dtype=torch.float32, device=h.device)
    fp32 = dtype == torch.float32
    with torch.autocast(hidden.device.type, enabled=False):
        for start in range(0, h.shape[0], rows):
            end = min(start + rows, h.shape[0])
            h_c = h[start:end]  # [n, d]
            logits = buffer[: end - start]  # [n, V] fp32: the only V-wide tensor
            if fp32:
                torch.mm(h_c, w.t(), out=logits)
                if b is not None:
                    logits.add_(b)
            else:  # the matmul in half precision, the softmax in fp32
                logits.copy_(F.linear(h_c, w, b))
            # Softmax in place (no second [n, V] tensor, as logsumexp would make): the
            # buffer becomes exp(logits − row max), then the softmax itself.
            target = logits.gather(1, safe[start:end])  # [n, 1]
            row_max = logits.amax(dim=1, keepdim=True)  # [n, 1]
            e = logits.sub_(row_max).exp_()  # [n, V]
            total = e.sum(dim=1, keepdim=True)  # [n, 1]
            lse = row_max + total.log()  # [n, 1]
            ce_sum = ce_sum + torch.where(counted[start:end], lse - target, 0.0).sum()
            if grads is None:
                continue
            # softmax − onehot(target), zero on ignored rows, still in the same buffer.
            g = e.mul_(scale[start:end] / total)
            g.scatter_add_(1, safe[start:end], -scale[start:end])
            if fp32:
                torch.mm(g, w, out=grads.hidden[start:end])  # [n, d]
                grads.weight.addmm_(g.t(), h_c)  # [V, d] in place, no temporary
            else:  # half precision: the products in that dtype, accumulated in fp32
                g_mm = g.to(dtype)
                grads.hidden[start:end] = g_mm @ w
                grads.weight.add_(g_mm.t() @ h_c)
            if grads.bias is not None:
                grads.bias.add_(g.sum(0))
    return ce_sum, grads


class _LinearCrossEntropy(torch.autograd.Function):
    """(hidden [M, d], weight [V, d], bias [V] | None, labels [M], rows) → ce_sum [] fp32."""

    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        labels: torch.Tensor,
        rows: int,
    ) -> torch.Tensor:
        ce_sum, grads = _chunked_ce(hidden, weight, bias, labels, rows, with_grads=True)
        ctx.grads = grads
        ctx.dtypes = (hidden.dtype, weight.dtype, None if bias is None else bias.dtype)
        return ce_sum

    @staticmethod
    def backward(ctx: Any, grad_ce: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        grads: _Grads | None = ctx.grads
        if grads is None:
            raise RuntimeError("the fused linear loss keeps its gradients for one backward only")
        ctx.grads = None  # the buffers are scaled in place: a second backward would be wrong
        h_dtype, w_dtype, b_dtype = ctx.dtypes
        scale = grad_ce.float()
        grad_h = grads.hidden.mul_(scale).to(h_dtype)
        grad_w = grads.weight.mul_(scale).to(w_dtype)
        grad_b = None if grads.bias is None else grads.bias.mul_(scale).to(b_dtype)
        return grad_h, grad_w, grad_b, None, None


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    labels: torch.Tensor,
    ids: torch.Tensor,
    rows: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`fused_cross_entropy(F.linear(hidden, weight, bias), labels, ids)` without the logits.

    hidden [M, d], weight [V, d], bias [V] or None, labels [M] (IGNORE = not counted),
    ids [N] → (ce_sum [] fp32, numeric slice [M, N] fp32). `rows`: positions per chunk.
    """
    step = rows or chunk_rows(weight.shape[0])
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (hidden, weight, bias)
    )
    if needs_grad:
        ce_sum: torch.Tensor = _LinearCrossEntropy.apply(hidden, weight, bias, labels, step)
    else:  # evaluation: no gradient buffers at all
        ce_sum, _ = _chunked_ce(hidden, weight, bias, labels, step, with_grads=False)
    # [M, N]: the numeric columns only, under autograd (the same dtype path as lm_head).
    numeric_bias = None if bias is None else bias.index_select(0, ids)
    numeric_slice = F.linear(hidden, weight.index_select(0, ids), numeric_bias).float()
    return ce_sum, numeric_slice
