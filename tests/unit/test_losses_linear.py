"""The fused linear loss equals the materialised path: values and gradients, every loss."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from jobs.losses import BatchCounts, NumericVocab, build_loss
from jobs.losses.catalog import LOSSES
from jobs.losses.fused import IGNORE
from jobs.spec import LOSS_NAMES, LossSpec

V, D = 97, 24
# Multi-digit number tokens (ids 40..63 → 0..23) so NTIL's runs and log scales are exercised.
VOCAB = NumericVocab(list(range(40, 64)), [float(v) for v in range(24)])
# The digit-level losses (del, dist2) on ten digit tokens (ids 40..49) and "." (id 50).
DIGITS = NumericVocab(list(range(40, 50)), [float(v) for v in range(10)], point_id=50)


def vocab_for(spec: LossSpec) -> NumericVocab:
    decl = LOSSES.get(spec.name)
    return DIGITS if decl is not None and decl.digit_level else VOCAB


def batch(
    numeric: bool = True, dtype: torch.dtype = torch.float32, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """hidden [3, 11, D], weight [V, D], bias [V], labels [3, 11] with ignored rows."""
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(3, 11, D, generator=gen).to(dtype)
    weight = (torch.randn(V, D, generator=gen) / D**0.5).to(dtype)
    bias = (torch.randn(V, generator=gen) * 0.1).to(dtype)
    labels = torch.randint(0, 40, (3, 11), generator=gen)
    if numeric:  # runs of 1-3 number tokens, one crossing the chunk boundaries below
        labels[0, 2:5] = torch.tensor([41, 45, 40])
        labels[1, 6] = 63
        labels[2, 0:2] = torch.tensor([50, 52])
    labels[0, 8:] = IGNORE  # padding
    labels[1, :3] = IGNORE  # prompt
    labels[2, 5] = IGNORE  # a lone ignored target between counted ones
    return hidden, weight, bias, labels


def run(
    spec: LossSpec,
    data: tuple[torch.Tensor, ...],
    fused: bool,
    rows: int | None = 4,
    counts: object = None,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(values [total, ce, numeric, *parts], grads [hidden, weight, bias])."""
    hidden, weight, bias, labels = (t.clone() for t in data)
    leaves = [t.requires_grad_() for t in (hidden, weight, bias)]
    loss = build_loss(spec, vocab_for(spec))
    torch.manual_seed(0)  # NTIL's Gumbel noise: the same draws on both paths
    if fused:
        out = loss.forward_hidden(hidden, weight, labels, counts, bias=bias, rows=rows)
    else:
        out = loss(F.linear(hidden, weight, bias), labels, counts)
    out.total.backward()
    values = [out.total, out.ce, out.numeric, *out.parts.values()]
    return [v.detach().float() for v in values], [t.grad.float() for t in leaves]


def assert_same(spec: LossSpec, data: tuple[torch.Tensor, ...], tol: float, **kw: object) -> None:
    want_values, want_grads = run(spec, data, fused=False, **kw)  # type: ignore[arg-type]
    got_values, got_grads = run(spec, data, fused=True, **kw)  # type: ignore[arg-type]
    for got, want in zip(got_values + got_grads, want_values + want_grads, strict=True):
        torch.testing.assert_close(got, want, atol=tol, rtol=tol)


SPECS = [LossSpec(name=name) for name in LOSS_NAMES] + [
    LossSpec(name="ntil", ntil_value="expectation"),
    LossSpec(name="smmd", mixing="ratio", distance="log", squash=3.0),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.name}-{s.mixing}-{s.ntil_value}")
@pytest.mark.parametrize("rows", [4, 7, 1000], ids=lambda r: f"rows{r}")
def test_values_and_grads_match_materialised_fp32(spec: LossSpec, rows: int) -> None:
    # 33 positions: chunks of 4 and 7 do not divide it; 1000 is one chunk.
    assert_same(spec, batch(), 1e-5, rows=rows)


@pytest.mark.parametrize("spec", SPECS[: len(LOSS_NAMES)], ids=lambda s: s.name)
def test_values_and_grads_match_materialised_bf16(spec: LossSpec) -> None:
    assert_same(spec, batch(dtype=torch.bfloat16), 1e-2, rows=5)


@pytest.mark.parametrize("name", ["ce", "smmd", "ntil"])
def test_a_batch_without_numbers(name: str) -> None:
    assert_same(LossSpec(name=name), batch(numeric=False), 1e-5)


@pytest.mark.parametrize("name", ["emd", "ntil"])
def test_hf_and_step_counts_normalise_like_the_materialised_path(name: str) -> None:
    data = batch()
    assert_same(LossSpec(name=name), data, 1e-5, counts=torch.tensor(57))
    assert_same(LossSpec(name=name), data, 1e-5, counts=BatchCounts.of(data[3], VOCAB))


def test_under_autocast_it_matches_the_autocast_lm_head() -> None:
    data = batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want, want_grads = run(LossSpec(name="smmd"), data, fused=False)
        got, got_grads = run(LossSpec(name="smmd"), data, fused=True)
    for a, b in zip(got + got_grads, want + want_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-2, rtol=1e-2)


def test_without_grad_it_keeps_no_gradient_buffers() -> None:
    hidden, weight, bias, labels = batch()
    loss = build_loss(LossSpec(name="emd"), VOCAB)
    with torch.no_grad():
        out = loss.forward_hidden(hidden, weight, labels, bias=bias, rows=5)
    want = loss(F.linear(hidden, weight, bias), labels)
    torch.testing.assert_close(out.total, want.total, atol=1e-5, rtol=1e-5)
    assert out.total.grad_fn is None


def test_a_second_backward_is_refused() -> None:
    hidden, weight, _, labels = batch()
    hidden.requires_grad_()
    out = build_loss(LossSpec(name="ce"), VOCAB).forward_hidden(hidden, weight, labels)
    out.total.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="one backward"):
        out.total.backward()


def test_shapes_are_checked() -> None:
    hidden, weight, _, labels = batch()
    loss = build_loss(LossSpec(name="emd"), VOCAB)
    with pytest.raises(ValueError, match="hidden states"):
        loss.forward_hidden(hidden[0], weight, labels)
    with pytest.raises(ValueError, match="outside"):
        loss.forward_hidden(hidden, weight[:50], labels)
