"""Image tasks on the tiny vision-language preset without Ray: the training step of
jobs/train/loop.py (fused loss from hidden states, pixel values in the batch) makes every loss
fall, and evaluation generates from the images."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from jobs.data import load_task
from jobs.data.tokenize import MODEL_INPUTS, collate, encode_example
from jobs.infer.evaluate import answers_for_spec, score
from jobs.losses import BatchCounts, NumericVocab, build_loss, shift_labels
from jobs.losses.head import HeadLoss
from jobs.modeling.folders import save_pretrained_safetensors
from jobs.modeling.model import load_checkpoint_model, load_model_and_tokenizer, load_tokenizer_for
from jobs.modeling.vision import IMAGE_TOKEN, VisionInputs
from jobs.spec import LOSS_NAMES, JobSpec, ModelSpec
from jobs.train.optim import build_optimizer


def image_spec(loss: str, task: str = "dots") -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "vlm",
            "model": {"source": "random:vlm-tiny", "use_chat_template": False},
            "data": {"task": task, "train_size": 16, "eval_size": 4, "max_length": 160},
            "loss": {"name": loss},
            "train": {"steps": 12, "batch_size": 16, "lr": 0.003, "warmup_steps": 0},
        }
    )


@pytest.mark.parametrize("loss", LOSS_NAMES)
def test_every_loss_falls_on_an_image_task(loss: str) -> None:
    spec = image_spec(loss)
    torch.manual_seed(0)
    model, tokenizer = load_model_and_tokenizer(spec.model, seed=0)
    vision = VisionInputs.of(model)
    assert vision is not None and vision.tokens == 64
    task = load_task(spec.data)
    rows = [encode_example(tokenizer, ex, 160, False, vision) for ex in task.train]
    batch = collate(rows, tokenizer.pad_token_id)  # pixel_values [16, 3, 32, 32]
    assert batch["pixel_values"].shape == (16, 3, 32, 32)
    inputs = {k: v for k, v in batch.items() if k in MODEL_INPUTS}
    labels = shift_labels(batch["labels"])
    vocab = NumericVocab.from_tokenizer(tokenizer)
    counts = BatchCounts.of([labels], vocab)
    step_loss = HeadLoss(build_loss(spec.loss, vocab), model)
    assert step_loss.fused  # the Llava head is plain: the loss reads hidden states
    optimizer = build_optimizer(model, spec)
    losses, parts = [], set()
    for _ in range(spec.train.steps or 0):
        out = step_loss(model, inputs, labels, counts)
        out.total.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(out.total.detach()))
        parts |= set(out.parts)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-3:]) / 3 < 0.7 * sum(losses[:3]) / 3, losses
    assert (loss == "ce") == (not parts)  # a numeric loss reports its own term


def test_the_vision_tower_gets_gradients_and_evaluation_reads_images() -> None:
    spec = image_spec("emd", task="clock_face")
    model, tokenizer = load_model_and_tokenizer(spec.model, seed=0)
    task = load_task(spec.data)
    rows = [encode_example(tokenizer, ex, 160, False, VisionInputs.of(model)) for ex in task.train]
    batch = collate(rows[:4], tokenizer.pad_token_id)
    out = model(**{k: v for k, v in batch.items() if k in MODEL_INPUTS}, labels=batch["labels"])
    out.loss.backward()
    tower = [p.grad for n, p in model.named_parameters() if "vision_tower" in n]
    assert tower and all(g is not None and g.abs().sum() > 0 for g in tower[:4])
    preds = answers_for_spec(model.eval(), tokenizer, task.eval, spec)
    assert len(preds) == 4
    assert set(score(preds, [ex.answer for ex in task.eval], "clock_face")) >= {"exact_match"}


def test_the_vision_preset_round_trips_through_a_safetensors_folder(tmp_path: Path) -> None:
    model, tokenizer = load_model_and_tokenizer(ModelSpec(source="random:vlm-tiny"), seed=5)
    save_pretrained_safetensors(model, tokenizer, tmp_path)
    assert {p.suffix for p in tmp_path.iterdir()} >= {".safetensors", ".json"}
    assert not any(p.suffix in (".bin", ".pt") for p in tmp_path.iterdir())
    loaded = load_checkpoint_model(tmp_path)  # AutoModelForImageTextToText: a vision config
    assert type(loaded) is type(model)
    folder_tokenizer = load_tokenizer_for(ModelSpec(source=str(tmp_path)))
    vision = VisionInputs.of(loaded, tmp_path)
    assert vision == VisionInputs.of(model) and vision is not None
    assert folder_tokenizer.convert_tokens_to_ids(IMAGE_TOKEN) == vision.image_token_id
    [example] = load_task(image_spec("ce", "bars").data).train[:1]
    batch = collate([encode_example(folder_tokenizer, example, 160, False, vision)], 0)
    inputs = {k: v for k, v in batch.items() if k in MODEL_INPUTS}
    with torch.no_grad():
        assert torch.equal(model(**inputs).logits, loaded(**inputs).logits)
