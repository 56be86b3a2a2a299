"""`ntl_number` equals the NTL authors' own `ntloss.NumberLevelLoss` on the same logits, with
the real Qwen2.5 tokenizer (ten digit tokens and "."), values and gradients."""

from __future__ import annotations

import pytest
import torch
from ntloss import NumberLevelLoss

from jobs.losses import LossConfig, NumericVocab, build_loss
from jobs.modeling.tokenizers import load_tokenizer

ANSWERS = [
    "The answer is 4096.",
    "12 apples and 345 pears",
    "pi is about 3.14159, e is 2.718",
    "7",
    "no number here",
]


@pytest.fixture(scope="module")
def inputs() -> tuple[object, torch.Tensor, torch.Tensor]:
    # ntloss may add tokens to the tokenizer it is given: a fresh one, not the shared cached one.
    tokenizer = load_tokenizer.__wrapped__("qwen2.5")
    rows = [tokenizer(text)["input_ids"] for text in ANSWERS]
    width = max(map(len, rows))
    labels = torch.tensor([r + [-100] * (width - len(r)) for r in rows])
    labels[0, :2] = -100  # a prompt
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(len(rows), width, len(tokenizer), generator=gen) * 2.0
    return tokenizer, logits, labels


def test_ntl_number_equals_ntloss_number_level_loss(
    inputs: tuple[object, torch.Tensor, torch.Tensor],
) -> None:
    tokenizer, logits, labels = inputs
    vocab = NumericVocab.from_tokenizer(tokenizer)
    assert vocab.digits_only and vocab.point_id == tokenizer.convert_tokens_to_ids(".")
    peer = NumberLevelLoss(tokenizer, vocab_size=logits.shape[-1], reweigh=False)
    theirs_x = logits.clone().requires_grad_(True)
    theirs = peer(theirs_x, labels)
    theirs.backward()
    ours_x = logits.clone().requires_grad_(True)
    ours = build_loss(LossConfig.make("ntl_number"), vocab)(ours_x, labels).numeric
    ours.backward()
    assert theirs.item() > 0.01
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)
    assert ours_x.grad is not None and theirs_x.grad is not None
    torch.testing.assert_close(ours_x.grad, theirs_x.grad, rtol=1e-4, atol=1e-8)
