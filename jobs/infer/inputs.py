"""A request's prompts (and images) as model inputs: token ids per prompt, and the pixel
values of the prompts that carry an image. Every problem is an InferenceRequestError that
names the field, so serving answers it with a 422."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from jobs.data.tokenize import encode_prompt
from jobs.infer.results import InferenceRequestError, check
from jobs.modeling.vision import ImageError, VisionInputs

# Per prompt: its encoded image, or a local file path (a job's own data, never a request's),
# or None.
Images = Sequence[bytes | str | None] | None


def encode_prompts(
    tokenizer: Any,
    prompts: Sequence[str],
    images: Images,
    *,
    chat: bool,
    use_chat_template: bool | None,
    vision: VisionInputs | None,
) -> list[list[int]]:
    """Each prompt's ids as generation sees them: formatted as in training when `chat`, and
    led by the image placeholders (vision.tokens of them) when the prompt has an image."""
    check(
        isinstance(prompts, list | tuple) and len(prompts) > 0,
        "prompts: give a non-empty list of strings",
    )
    per_prompt = list(images) if images is not None else [None] * len(prompts)
    check(len(per_prompt) == len(prompts), "images: give one image (or null) per prompt")
    encoded = []
    for i, (prompt, image) in enumerate(zip(prompts, per_prompt, strict=True)):
        check(isinstance(prompt, str), f"prompts[{i}]: must be a string")
        check(
            image is None or vision is not None,
            f"images[{i}]: this model is text-only and takes no images",
        )
        seen = vision if image is not None else None
        if chat:
            ids = encode_prompt(tokenizer, prompt, use_chat_template, seen)
        else:
            placeholders = [] if seen is None else [seen.image_token_id] * seen.tokens
            ids = placeholders + list(tokenizer(prompt)["input_ids"])
        check(len(ids) > 0, f"prompts[{i}]: the prompt is empty")
        encoded.append(ids)
    return encoded


def pixel_values(vision: VisionInputs | None, images: Images) -> torch.Tensor | None:
    """[I, 3, S, S] pixel values of the prompts that have an image (I of them, in prompt
    order), or None when none has; encode_prompts has already refused images for a
    text-only model."""
    if vision is None:
        return None
    pixels = []
    for i, image in enumerate(images or []):
        if image is None:
            continue
        try:
            pixels.append(vision.pixels(image))
        except ImageError as error:
            raise InferenceRequestError(f"images[{i}]: {error}") from None
    return torch.stack(pixels) if pixels else None
