"""Our losses inside a real Hugging Face Trainer: accumulation does not change the gradient."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

from jobs.losses import LossConfig, compute_loss_func, fused_compute_loss_func, shift_labels
from jobs.losses.vocab import NumericVocab
from jobs.spec import LossSpec

V = 64
DIGIT_IDS = list(range(10, 20))


class DigitTokenizer:
    """Just enough tokenizer for `compute_loss_func`: ids 10..19 are the digits 0..9."""

    def get_vocab(self) -> dict[str, int]:
        vocab = {f"<t{i}>": i for i in range(V)}
        vocab.update({str(d): 10 + d for d in range(10)})
        return vocab


def dataset() -> list[dict[str, torch.Tensor]]:
    """8 sequences of prompt noise + a 1-4 digit answer, right-padded, loss on the answer."""
    gen = torch.Generator().manual_seed(0)
    rows = []
    for i in range(8):
        prompt = torch.randint(20, V, (5 + i % 3,), generator=gen)
        answer = torch.tensor(DIGIT_IDS)[torch.randint(0, 10, (1 + i % 4,), generator=gen)]
        ids = torch.cat([prompt, answer, torch.tensor([1])])
        labels = torch.cat([torch.full_like(prompt, -100), answer, torch.tensor([1])])
        pad = 13 - len(ids)
        rows.append(
            {
                "input_ids": torch.cat([ids, torch.zeros(pad, dtype=torch.long)]),
                "attention_mask": torch.cat(
                    [torch.ones_like(ids), torch.zeros(pad, dtype=torch.long)]
                ),
                "labels": torch.cat([labels, torch.full((pad,), -100)]),
            }
        )
    return rows


def one_step_gradient(
    tmp: Path, spec: LossSpec | LossConfig, batch: int, accum: int, fused: bool = False
) -> dict[str, torch.Tensor]:
    """-Δθ of one plain SGD step at lr 1 (no clipping, no decay): the accumulated gradient."""
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=V,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32,
        )
    )
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    args = TrainingArguments(
        output_dir=str(tmp),
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=accum,
        max_steps=1,
        learning_rate=1.0,
        optim="sgd",
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=0.0,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        seed=0,
        dataloader_drop_last=False,
    )
    Trainer(
        model=model,
        args=args,
        train_dataset=dataset(),
        compute_loss_func=(
            fused_compute_loss_func(spec, DigitTokenizer(), model)
            if fused
            else compute_loss_func(spec, DigitTokenizer())
        ),
    ).train()
    return {k: before[k] - v.detach() for k, v in model.named_parameters()}


@pytest.mark.parametrize(
    "spec",
    [LossSpec(name="smmd"), LossSpec(name="ntil", gumbel_noise=0.0), LossSpec(name="emd")],
    ids=lambda s: s.name,
)
def test_accumulation_gives_the_same_gradient_as_one_batch(tmp_path: Path, spec: LossSpec) -> None:
    whole = one_step_gradient(tmp_path / "a", spec, batch=8, accum=1)
    accumulated = one_step_gradient(tmp_path / "b", spec, batch=4, accum=2)
    assert max(g.abs().max().item() for g in whole.values()) > 1e-4  # it did learn something
    for name, grad in whole.items():
        torch.testing.assert_close(accumulated[name], grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("name", ["del", "dist2", "ntl_number"])
def test_the_2026_losses_accumulate_exactly_from_a_pydantic_free_config(
    tmp_path: Path, name: str
) -> None:
    spec = LossConfig.make(name)
    whole = one_step_gradient(tmp_path / "a", spec, batch=8, accum=1)
    accumulated = one_step_gradient(tmp_path / "b", spec, batch=4, accum=2)
    fused = one_step_gradient(tmp_path / "c", spec, batch=4, accum=2, fused=True)
    assert max(g.abs().max().item() for g in whole.values()) > 1e-4
    for key, grad in whole.items():
        torch.testing.assert_close(accumulated[key], grad, atol=1e-5, rtol=1e-4, msg=key)
        torch.testing.assert_close(fused[key], grad, atol=1e-5, rtol=1e-4, msg=key)


@pytest.mark.parametrize("name", ["smmd", "ntil"])
def test_fused_loss_func_gives_the_materialised_gradient(tmp_path: Path, name: str) -> None:
    spec = LossSpec(name=name, gumbel_noise=0.0)
    want = one_step_gradient(tmp_path / "a", spec, batch=4, accum=2)
    got = one_step_gradient(tmp_path / "b", spec, batch=4, accum=2, fused=True)
    for key, grad in want.items():
        torch.testing.assert_close(got[key], grad, atol=1e-5, rtol=1e-4, msg=key)


def test_shift_labels_moves_targets_not_logits() -> None:
    labels = torch.tensor([[5, 6, 7], [-100, 8, 9]])
    assert shift_labels(labels).tolist() == [[6, 7, -100], [8, 9, -100]]


def test_vocab_from_digit_tokenizer() -> None:
    vocab = NumericVocab.from_tokenizer(DigitTokenizer())
    assert vocab.token_ids == DIGIT_IDS and vocab.values == [float(d) for d in range(10)]
