"""DEL, DIST2 and NTL's number-level loss against float64 re-derivations of their definitions,
written here with Python loops over positions (values and gradients, 1e-5)."""

from __future__ import annotations

import math

import pytest
import torch

from jobs.losses import LossConfig, NumericVocab, build_loss

V = 48
# Digit d is token DIGIT_IDS[d] (ids out of value order, as a tokenizer's are); "." is 5.
DIGIT_IDS = [30, 3, 17, 41, 8, 22, 35, 12, 27, 44]
POINT = 5
DIGITS = NumericVocab(DIGIT_IDS, [float(d) for d in range(10)], point_id=POINT)
OTHER = {" ": 1, "x": 2, "=": 4, "a": 6, "n": 7, "d": 9}
IGNORED = -100
# The hand-made cases: integers, two numbers in one answer, decimals, a single digit,
# no number; "?" marks a prompt position (ignored), "4 2." ends a number with a full stop.
CASES = {
    "integer": "??x=4096",
    "two numbers": "?12 and 345",
    "decimal": "??3.14",
    "decimal, full stop": "?x=42.",
    "fraction only": "?.05 and 7.2.9",
    "single digit": "???7",
    "no number": "??xand",
}


def encode(text: str, width: int) -> list[int]:
    ids = [
        IGNORED
        if ch == "?"
        else POINT
        if ch == "."
        else DIGIT_IDS[int(ch)]
        if ch.isdigit()
        else OTHER[ch]
        for ch in text
    ]
    return ids + [IGNORED] * (width - len(ids))


def batch(texts: list[str], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, texts))
    labels = torch.tensor([encode(t, width) for t in texts])
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(len(texts), width, V, generator=gen) * 2.0, labels


def runs(row: list[int], member: set[int]) -> list[list[int]]:
    """Maximal runs of consecutive positions whose label is in `member`."""
    found: list[list[int]] = []
    for t, label in enumerate(row):
        if label in member and found and found[-1][-1] == t - 1:
            found[-1].append(t)
        elif label in member:
            found.append([t])
    return found


def reference(name: str, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The numeric term of `name` in float64, straight from the definitions."""
    x = logits.double()
    value_of = {tok: d for d, tok in enumerate(DIGIT_IDS)}
    digit_cols = torch.tensor(DIGIT_IDS)
    terms: list[torch.Tensor] = []
    numbers = 0
    for b, row in enumerate(labels.tolist()):
        if name == "del":
            for run in runs(row, set(DIGIT_IDS) | {POINT}):
                point_at = next((i for i, t in enumerate(run) if row[t] == POINT), len(run))
                for i, t in enumerate(run):
                    if row[t] == POINT:
                        continue
                    if i < point_at:  # integer digit at power k
                        k = sum(row[u] != POINT for u in run[i + 1 : point_at])
                        weight = 2.0 * (k + 1)
                    else:  # the m-th digit after the point
                        m = sum(row[u] != POINT for u in run[point_at : i + 1])
                        weight = 1.02 ** -(m + 1)
                    z = x[b, t, digit_cols]  # [10] in digit order
                    p = torch.softmax(z, -1)
                    onehot = torch.zeros(10, dtype=torch.float64)
                    onehot[value_of[row[t]]] = 1.0
                    sig = torch.sigmoid(z)
                    bce = -(onehot * torch.log(sig) + (1 - onehot) * torch.log(1 - sig))
                    terms.append(weight * (p * bce).sum() / 10.0)
        elif name == "dist2":
            for run in runs(row, set(DIGIT_IDS)):
                for i, t in enumerate(run):
                    y = value_of[row[t]]
                    target = torch.softmax(
                        torch.tensor([-((y - d) ** 2) for d in range(10)], dtype=torch.float64), -1
                    )
                    q = torch.softmax(x[b, t, digit_cols], -1)
                    kl = (target * (target.log() - q.log())).sum()
                    terms.append((len(run) - i) * kl)  # k + 1 = digits from here to the end
        else:  # ntl_number
            for run in runs(row, set(DIGIT_IDS)):
                numbers += 1
                digits = torch.arange(10, dtype=torch.float64)
                pred = sum(
                    (torch.softmax(x[b, t, digit_cols], -1) * digits).sum()
                    * 10.0 ** (len(run) - i - 1)
                    for i, t in enumerate(run)
                )
                true = sum(value_of[row[t]] * 10.0 ** (len(run) - i - 1) for i, t in enumerate(run))
                eps = torch.finfo(torch.float32).eps
                terms.append(abs(pred - true) / (abs(pred) + abs(true) + eps))
    digit_positions = sum(label in DIGIT_IDS for label in labels.flatten().tolist())
    if not terms:
        return x.sum() * 0.0
    total = torch.stack(terms).sum()
    if name == "del":
        return 0.01 * total / digit_positions
    return total / (numbers if name == "ntl_number" else digit_positions)


def ours(name: str, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return build_loss(LossConfig.make(name), DIGITS)(logits, labels).numeric


@pytest.mark.parametrize("name", ["del", "dist2", "ntl_number"])
@pytest.mark.parametrize("case", [*CASES, "all in one batch"])
def test_values_and_gradients_equal_the_float64_definition(name: str, case: str) -> None:
    texts = list(CASES.values()) if case == "all in one batch" else [CASES[case]]
    logits, labels = batch(texts, seed=len(case))
    got_x = logits.clone().requires_grad_(True)
    want_x = logits.double().requires_grad_(True)
    got, want = ours(name, got_x, labels), reference(name, want_x, labels)
    got.backward()
    want.backward()
    assert got.item() == pytest.approx(want.item(), rel=1e-5, abs=1e-7)
    assert want_x.grad is not None and got_x.grad is not None
    torch.testing.assert_close(got_x.grad.double(), want_x.grad, rtol=1e-5, atol=1e-7)
    if case == "no number":
        assert got.item() == 0.0
    else:
        assert got.item() > 0.0


def test_del_place_weights_match_the_definition() -> None:
    """On one-hot-free inputs (all logits 0) DEL's per-digit term is the same constant, so
    the term is that constant times the mean place weight: 2(k+1) and 1.02^-(m+1)."""
    logits, labels = batch(["?12.05"])
    out = ours("del", torch.zeros_like(logits), labels)
    p, bce_hot, bce_cold = 0.1, math.log(2.0), math.log(2.0)  # sigmoid(0) = 1/2
    per_digit = (p * bce_hot + 9 * p * bce_cold) / 10
    weights = [2 * 2, 2 * 1, 1.02**-2, 1.02**-3]  # 1 (k=1), 2 (k=0), 0 (m=1), 5 (m=2)
    assert out.item() == pytest.approx(0.01 * per_digit * sum(weights) / 4, rel=1e-6)


def test_del_without_a_decimal_point_id_treats_the_point_as_a_separator() -> None:
    """No "." token known: "3.14" is two integers, 3 and 14, for DEL."""
    no_point = NumericVocab(DIGIT_IDS, [float(d) for d in range(10)])
    logits, labels = batch(["?3.14"])
    split = build_loss(LossConfig.make("del"), no_point)(logits, labels).numeric
    logits2, labels2 = batch(["?3x14"])
    assert torch.equal(logits, logits2)  # same seed and width
    assert split.item() == pytest.approx(ours("del", logits, labels2).item(), rel=1e-6)


# LLaMA-3 style: "0".."999" (ids 100 + value), digit lengths as the tokenizer gives them.
MULTI = NumericVocab(
    [100 + v for v in range(1000)], [float(v) for v in range(1000)], point_id=POINT
)


@pytest.mark.parametrize("name", ["del", "dist2"])
def test_digit_level_losses_refuse_multi_digit_vocabularies(name: str) -> None:
    with pytest.raises(ValueError, match=rf"loss.name: {name} is defined on single-digit"):
        build_loss(LossConfig.make(name), MULTI)


def test_ntl_number_extends_to_multi_digit_tokens_with_place_values() -> None:
    """ "1234567" as 123|456|7: the number is ŷ₁·10⁴ + ŷ₂·10¹ + ŷ₃, ŷ the expected value."""
    tokens = [123, 456, 7]
    labels = torch.tensor([[IGNORED, *(100 + v for v in tokens), 2]])
    logits = torch.randn(1, 5, 1100, generator=torch.Generator().manual_seed(3)) * 3
    got_x = logits.clone().requires_grad_(True)
    got = build_loss(LossConfig.make("ntl_number"), MULTI)(got_x, labels).numeric
    got.backward()
    want_x = logits.double().requires_grad_(True)
    values = torch.arange(1000, dtype=torch.float64)
    expect = [(torch.softmax(want_x[0, 1 + i, 100:1100], -1) * values).sum() for i in range(3)]
    pred = expect[0] * 1e4 + expect[1] * 1e1 + expect[2]
    want = (pred - 1234567).abs() / (pred.abs() + 1234567 + torch.finfo(torch.float32).eps)
    want.backward()
    assert got.item() == pytest.approx(want.item(), rel=1e-5)
    assert got_x.grad is not None and want_x.grad is not None
    torch.testing.assert_close(got_x.grad.double(), want_x.grad, rtol=1e-4, atol=1e-9)
