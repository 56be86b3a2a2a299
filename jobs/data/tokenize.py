"""Prompt/answer tokenisation with the loss masked to the answer, and batch collation.

Labels follow the Hugging Face causal-LM convention: `labels` is a copy of `input_ids`
with -100 on every prompt token (and on padding); the loss shifts them itself. The
prompt and the answer are tokenised separately, so the boundary between them is exact.
"""

from __future__ import annotations

from typing import Any

import torch

from jobs.data.types import DataError, Example
from jobs.losses.fused import IGNORE

PLAIN_TEMPLATE = "Question: {prompt}\nAnswer:"


def uses_chat_template(tokenizer: Any, use_chat_template: bool | None) -> bool:
    """The chat template is used when asked, or by default when the tokenizer has one."""
    has = bool(getattr(tokenizer, "chat_template", None))
    if use_chat_template and not has:
        raise DataError("model.use_chat_template: this tokenizer has no chat template")
    return has if use_chat_template is None else use_chat_template


def encode_prompt(tokenizer: Any, prompt: str, use_chat_template: bool | None) -> list[int]:
    """Token ids of a prompt, formatted exactly as in training (ready for generation)."""
    if uses_chat_template(tokenizer, use_chat_template):
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=True, add_generation_prompt=True
        )
        # transformers 5 may return a BatchEncoding-like mapping instead of a plain list.
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
    return list(tokenizer(PLAIN_TEMPLATE.format(prompt=prompt))["input_ids"])


def encode_answer(tokenizer: Any, answer: str, chat: bool) -> list[int]:
    """Answer ids followed by end-of-sequence; the plain format puts a space before it."""
    text = answer if chat else f" {answer}"
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return [*ids, tokenizer.eos_token_id]


def encode_example(
    tokenizer: Any, example: Example, max_length: int, use_chat_template: bool | None
) -> dict[str, list[int]]:
    chat = uses_chat_template(tokenizer, use_chat_template)
    prompt = encode_prompt(tokenizer, example.prompt, use_chat_template)
    answer = encode_answer(tokenizer, example.answer, chat)
    if len(prompt) + len(answer) > max_length:
        raise DataError(
            f"data.max_length: {max_length} tokens is too short for the example "
            f"{example.prompt!r} ({len(prompt)} prompt + {len(answer)} answer tokens)"
        )
    return {"input_ids": prompt + answer, "labels": [IGNORE] * len(prompt) + answer}


def collate(rows: list[dict[str, list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded [B, T] input_ids, attention_mask and labels (-100 on padding)."""
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        n = len(row["input_ids"])
        ids[i, :n] = torch.tensor(row["input_ids"])
        labels[i, :n] = torch.tensor(row["labels"])
        mask[i, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def collate_prompts(prompts: list[list[int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-padded [B, T] prompts for generation (new tokens all start at the same column)."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, prompt in enumerate(prompts):
        ids[i, width - len(prompt) :] = torch.tensor(prompt)
        mask[i, width - len(prompt) :] = 1
    return {"input_ids": ids, "attention_mask": mask}
