"""The training step takes the loss from hidden states when the model's head allows."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from jobs.losses import BatchCounts, NumericVocab, build_loss
from jobs.losses.head import HeadLoss, fusable_head
from jobs.spec import LossSpec

V = 80
VOCAB = NumericVocab(list(range(10, 20)), [float(d) for d in range(10)])


def tiny(tied: bool = True, **extra: object) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=V,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
        tie_word_embeddings=tied,
        **extra,
    )
    return LlamaForCausalLM(config)


def step(model: LlamaForCausalLM, enabled: bool) -> tuple[HeadLoss, list[torch.Tensor]]:
    """One loss + backward on a fixed batch: (the step's HeadLoss, [loss, *grads])."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, V, (3, 9), generator=gen)
    labels = torch.where(torch.rand(3, 9, generator=gen) < 0.4, 10 + ids % 10, ids)
    labels[:, :2] = -100
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    model.zero_grad(set_to_none=True)
    loss = HeadLoss(build_loss(LossSpec(name="smmd"), VOCAB), model, enabled=enabled)
    out = loss(model, inputs, labels, BatchCounts.of(labels, VOCAB))
    out.total.backward()
    return loss, [out.total.detach(), *(p.grad for p in model.parameters())]


def test_the_step_uses_hidden_states_and_matches_the_logits_path() -> None:
    for tied in (True, False):
        fused, got = step(tiny(tied), enabled=True)
        plain, want = step(tiny(tied), enabled=False)
        assert fused.fused and not plain.fused
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_the_model_computes_no_logits_on_the_fused_path() -> None:
    model = tiny()
    seen: list[torch.Size] = []
    model.lm_head.register_forward_hook(lambda m, a, out: seen.append(out.shape))
    step(model, enabled=True)
    assert seen == [torch.Size([3, 0, V])]


def test_heads_that_change_the_logits_keep_them() -> None:
    assert fusable_head(tiny()) is not None
    assert fusable_head(tiny(final_logit_softcapping=30.0)) is None
    model = tiny()
    model.lm_head = torch.nn.Sequential(model.lm_head)  # not a plain Linear
    assert fusable_head(model) is None
