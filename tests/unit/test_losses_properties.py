"""Properties every numeric loss must keep, on random inputs (hypothesis)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from jobs.losses import BatchCounts, NumericVocab, build_loss
from jobs.spec import LOSS_NAMES, LossSpec

V = 40
VOCABS = {
    # id 0 is the decimal point (DEL's numbers include it; a non-numeric target for the rest)
    "digits": NumericVocab(list(range(20, 30)), [float(i) for i in range(10)], point_id=0),
    "irregular": NumericVocab([3, 9, 14, 31, 37], [0.0, 1.0, 2.0, 10.0, 100.0]),
}
NUMERIC = [name for name in LOSS_NAMES if name != "ce"]  # every loss with a numeric term
SPECS = [
    LossSpec(name="emd"),
    LossSpec(name="ntl_mse"),
    LossSpec(name="mmd", kernel="laplacian"),
    LossSpec(name="smmd", squash=4.0),
    LossSpec(name="ntil", ntil_value="expectation"),
    LossSpec(name="ntil"),
    LossSpec(name="ntl_number"),
]
# Defined on the ten digits only: checked on the digit vocabulary.
DIGIT_LEVEL = [LossSpec(name="del"), LossSpec(name="dist2")]
FAST = settings(max_examples=25, deadline=None)


def batch(seed: int, vocab: NumericVocab, scale: float = 3.0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 6, V, generator=gen) * scale
    ids = torch.tensor(vocab.token_ids)
    labels = ids[torch.randint(0, len(ids), (2, 6), generator=gen)]
    labels[0, 0] = -100
    labels[1, 2] = 0  # a non-numeric target
    return logits, labels


@FAST
@given(
    seed=st.integers(0, 10_000), spec=st.sampled_from(SPECS), vocab=st.sampled_from(list(VOCABS))
)
def test_non_negative(seed: int, spec: LossSpec, vocab: str) -> None:
    check_non_negative(seed, spec, vocab)


@FAST
@given(seed=st.integers(0, 10_000), spec=st.sampled_from(DIGIT_LEVEL))
def test_digit_level_non_negative(seed: int, spec: LossSpec) -> None:
    check_non_negative(seed, spec, "digits")


def check_non_negative(seed: int, spec: LossSpec, vocab: str) -> None:
    logits, labels = batch(seed, VOCABS[vocab])
    out = build_loss(spec, VOCABS[vocab])(logits, labels)
    assert out.numeric.item() >= 0
    assert all(v.item() >= -1e-6 for k, v in out.parts.items() if k != "smooth")


@FAST
@given(seed=st.integers(0, 10_000), name=st.sampled_from(["emd", "mmd", "smmd", "ntl_mse"]))
def test_zero_at_a_confident_correct_prediction(seed: int, name: str) -> None:
    vocab = VOCABS["irregular"]
    _, labels = batch(seed, vocab)
    logits = torch.full((2, 6, V), -30.0)
    logits.scatter_(2, labels.clamp(min=0).unsqueeze(-1), 30.0)  # one-hot at the target
    out = build_loss(LossSpec(name=name), vocab)(logits, labels)
    assert out.numeric.item() == pytest.approx(0.0, abs=1e-6)


@FAST
@given(seed=st.integers(0, 10_000), spec=st.sampled_from(SPECS))
def test_finite_gradients_for_huge_logits(seed: int, spec: LossSpec) -> None:
    logits, labels = batch(seed, VOCABS["irregular"], scale=1.0)
    logits = (logits.sign() * 1e4).requires_grad_()
    out = build_loss(spec, VOCABS["irregular"])(logits, labels)
    out.total.backward()
    assert torch.isfinite(out.total) and logits.grad is not None
    assert torch.isfinite(logits.grad).all()


@FAST
@given(seed=st.integers(0, 10_000), spec=st.sampled_from(SPECS[:5]))
def test_bf16_logits_close_to_fp32(seed: int, spec: LossSpec) -> None:
    logits, labels = batch(seed, VOCABS["digits"])
    logits = logits.bfloat16().float()  # the same values, exactly representable in bf16
    loss = build_loss(spec, VOCABS["digits"])
    full = loss(logits, labels)
    half = loss(logits.bfloat16(), labels)
    assert half.total.item() == pytest.approx(full.total.item(), rel=1e-2)
    assert half.numeric.item() == pytest.approx(full.numeric.item(), rel=1e-2, abs=1e-4)


@pytest.mark.parametrize("name", NUMERIC)
def test_no_numeric_targets_gives_exact_zero_and_zero_gradient(name: str) -> None:
    vocab = VOCABS["digits"]
    logits = torch.randn(2, 5, V, requires_grad=True)
    labels = torch.randint(0, 19, (2, 5))  # ids below 20: none numeric
    loss = build_loss(LossSpec(name=name, mixing="ratio"), vocab)
    out = loss(logits, labels)
    assert out.numeric.item() == 0.0
    (grad,) = torch.autograd.grad(out.numeric, logits, allow_unused=True)
    assert grad is None or torch.count_nonzero(grad) == 0
    assert torch.isfinite(out.total)


@pytest.mark.parametrize(
    ("logits", "labels", "needle"),
    [
        (torch.randn(2, 5), torch.zeros(2, dtype=torch.long), "expected logits"),
        (torch.randn(2, 5, V), torch.zeros(2, 4, dtype=torch.long), "expected logits"),
        (torch.randn(2, 5, V), torch.zeros(2, 5), "int64"),
        (torch.randn(2, 5, 25), torch.zeros(2, 5, dtype=torch.long), "outside the logits"),
    ],
)
def test_bad_shapes_raise_instead_of_returning_zero(
    logits: torch.Tensor, labels: torch.Tensor, needle: str
) -> None:
    with pytest.raises(ValueError, match=needle):
        build_loss(LossSpec(name="emd"), VOCABS["digits"])(logits, labels)


def test_accumulated_counts_give_the_unaccumulated_loss() -> None:
    vocab = VOCABS["irregular"]
    logits, labels = batch(7, vocab)
    for spec in SPECS:
        loss = build_loss(spec.model_copy(update={"gumbel_noise": 0.0}), vocab)
        whole = loss(logits, labels)
        counts = BatchCounts.of([labels[:1], labels[1:]], vocab)
        halves = [loss(logits[i : i + 1], labels[i : i + 1], counts) for i in (0, 1)]
        assert (halves[0].total + halves[1].total).item() == pytest.approx(
            whole.total.item(), rel=1e-5
        )


class _NoHostSync(TorchDispatchMode):
    """Fails on the op behind .item(), bool(tensor) and printing: a device-to-host sync."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func is torch.ops.aten._local_scalar_dense.default:
            raise AssertionError("host sync in the loss")
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("spec", SPECS + DIGIT_LEVEL, ids=lambda s: s.name)
def test_forward_and_backward_never_sync_with_the_host(spec: LossSpec) -> None:
    vocab = VOCABS["digits" if spec in DIGIT_LEVEL else "irregular"]
    logits, labels = batch(1, vocab)
    logits.requires_grad_()
    loss = build_loss(spec, vocab)
    with _NoHostSync():
        out = loss(logits, labels)
        out.total.backward()
    assert logits.grad is not None
