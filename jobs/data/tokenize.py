"""Prompt/answer tokenisation with the loss masked to the answer, and batch collation.

Labels follow the Hugging Face causal-LM convention: `labels` is a copy of `input_ids`
with -100 on every prompt token (and on padding); the loss shifts them itself. The
prompt and the answer are tokenised separately, so the boundary between them is exact.

An example with an image (for a vision-language model) starts its prompt with the image's
placeholder tokens (`VisionInputs.tokens` of them: the model puts the projected patches
there) and its row carries the [3, S, S] pixel values; the placeholders are prompt, so
they are masked out of the loss like the rest of it.
"""

from __future__ import annotations

from typing import Any

import torch

from jobs.data.types import DataError, Example
from jobs.losses.fused import IGNORE
from jobs.modeling.vision import ImageError, VisionInputs

Row = dict[str, Any]  # input_ids, labels: list[int]; pixel_values: [3, S, S] when it has one
MODEL_INPUTS = ("input_ids", "attention_mask", "pixel_values")  # a batch's forward arguments

PLAIN_TEMPLATE = "Question: {prompt}\nAnswer:"


def uses_chat_template(tokenizer: Any, use_chat_template: bool | None) -> bool:
    """The chat template is used when asked, or by default when the tokenizer has one."""
    has = bool(getattr(tokenizer, "chat_template", None))
    if use_chat_template and not has:
        raise DataError("model.use_chat_template: this tokenizer has no chat template")
    return has if use_chat_template is None else use_chat_template


def encode_prompt(
    tokenizer: Any, prompt: str, use_chat_template: bool | None, vision: VisionInputs | None = None
) -> list[int]:
    """Token ids of a prompt, formatted exactly as in training (ready for generation);
    `vision`: the prompt is about an image, whose placeholders come first."""
    image = [] if vision is None else [vision.image_token_id] * vision.tokens
    if uses_chat_template(tokenizer, use_chat_template):
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=True, add_generation_prompt=True
        )
        # transformers 5 may return a BatchEncoding-like mapping instead of a plain list.
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        return image + list(ids)
    return image + list(tokenizer(PLAIN_TEMPLATE.format(prompt=prompt))["input_ids"])


def example_vision(example: Example, vision: VisionInputs | None) -> VisionInputs | None:
    """The vision inputs an example's prompt uses: none without an image; an image for a
    model that sees none is an error."""
    if example.image is None:
        return None
    if vision is None:
        raise DataError(
            "model.source: the data has images and this model is text-only; use a"
            " vision-language model (random:vlm-tiny, or a Llava-architecture folder)"
        )
    return vision


def encode_answer(tokenizer: Any, answer: str, chat: bool) -> list[int]:
    """Answer ids followed by end-of-sequence; the plain format puts a space before it."""
    text = answer if chat else f" {answer}"
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return [*ids, tokenizer.eos_token_id]


def encode_example(
    tokenizer: Any,
    example: Example,
    max_length: int,
    use_chat_template: bool | None,
    vision: VisionInputs | None = None,
) -> Row:
    chat = uses_chat_template(tokenizer, use_chat_template)
    seen = example_vision(example, vision)
    prompt = encode_prompt(tokenizer, example.prompt, use_chat_template, seen)
    answer = encode_answer(tokenizer, example.answer, chat)
    if len(prompt) + len(answer) > max_length:
        raise DataError(
            f"data.max_length: {max_length} tokens is too short for the example "
            f"{example.prompt!r} ({len(prompt)} prompt + {len(answer)} answer tokens)"
        )
    row: Row = {"input_ids": prompt + answer, "labels": [IGNORE] * len(prompt) + answer}
    if seen is not None and example.image is not None:
        try:
            row["pixel_values"] = seen.pixels(example.image)
        except ImageError as error:
            raise DataError(f"image of {example.prompt!r}: {error}") from None
    return row


def collate(rows: list[Row], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded [B, T] input_ids, attention_mask and labels (-100 on padding); the rows'
    images as [I, 3, S, S] pixel_values (I ≤ B: in row order, for the rows that have one)."""
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        n = len(row["input_ids"])
        ids[i, :n] = torch.tensor(row["input_ids"])
        labels[i, :n] = torch.tensor(row["labels"])
        mask[i, :n] = 1
    out = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    pixels = [r["pixel_values"] for r in rows if "pixel_values" in r]
    if pixels:
        out["pixel_values"] = torch.stack(pixels)
    return out


def collate_prompts(prompts: list[list[int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-padded [B, T] prompts for generation (new tokens all start at the same column)."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, prompt in enumerate(prompts):
        ids[i, width - len(prompt) :] = torch.tensor(prompt)
        mask[i, width - len(prompt) :] = 1
    return {"input_ids": ids, "attention_mask": mask}
