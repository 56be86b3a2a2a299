"""Images for vision-language models: the checks an image must pass, and pixel values.

One path for every image numtune reads (a generated task's PNG bytes, a JSONL row's image
file, a served request's base64 or data URL): `read_image` checks it (size in bytes, a
format PIL decodes, at most MAX_IMAGE_SIDE pixels a side) and `VisionInputs.pixels` turns
it into the [3, S, S] float tensor the model's vision tower takes: RGB, resized to S × S
(bicubic), scaled to [0, 1], normalised by the tower's mean and std. No torchvision and no
transformers image processor: PIL and numpy do it, so the same code runs in the service,
the Ray workers and the replicas.

`VisionInputs.of(model)` reads what a prompt needs from a Llava-architecture config: the
image placeholder token id and how many placeholders one image takes (one per patch the
projector emits). A text-only model gives None.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, UnidentifiedImageError

if TYPE_CHECKING:  # the control plane checks images without importing torch
    import torch

MAX_IMAGE_BYTES = 4_000_000  # one image, encoded (a served request's body is capped too)
MAX_IMAGE_SIDE = 2048  # pixels; PIL's own bomb guard is far larger
IMAGE_FORMATS = ("PNG", "JPEG", "GIF", "BMP", "WEBP")
IMAGE_TOKEN = "<image>"  # the placeholder a prompt carries once per image patch
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)  # CLIP's, also what llava folders ship
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class ImageError(ValueError):
    """An image numtune will not read (the message says why); the callers add where it was."""


def image_bytes(source: bytes | str | Path) -> bytes:
    """The encoded bytes of an image given as bytes or as a local file path."""
    if isinstance(source, bytes):
        data = source
    else:
        path = Path(source)
        if not path.is_file():
            raise ImageError(f"{path}: no such image file")
        if path.stat().st_size > MAX_IMAGE_BYTES:
            raise ImageError(f"{path}: larger than {MAX_IMAGE_BYTES} bytes")
        data = path.read_bytes()
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageError(f"the image is larger than {MAX_IMAGE_BYTES} bytes")
    return data


def read_image(source: bytes | str | Path) -> Image.Image:
    """A checked, fully decoded RGB image; ImageError for anything else."""
    data = image_bytes(source)
    try:
        with Image.open(io.BytesIO(data)) as opened:
            if opened.format not in IMAGE_FORMATS:
                raise ImageError(f"image format {opened.format} is not one of {IMAGE_FORMATS}")
            width, height = opened.size  # read from the header, before decoding any pixel
            if max(width, height) > MAX_IMAGE_SIDE:
                raise ImageError(
                    f"the image is {width}x{height} pixels; at most {MAX_IMAGE_SIDE} a side"
                )
            return opened.convert("RGB")
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as error:
        raise ImageError(f"not a readable image ({type(error).__name__})") from None
    except ValueError as error:
        # PIL's refusal of an oversized compressed chunk (an 8 MB zTXt or iCCP):
        # "Decompressed Data Too Large".
        raise ImageError(f"not a readable image ({error})") from None


def image_format(data: bytes) -> str:
    """The format ("PNG", "JPEG", ...) of encoded bytes that pass read_image's checks."""
    read_image(data)
    with Image.open(io.BytesIO(data)) as opened:
        return str(opened.format)


@dataclass(frozen=True)
class VisionInputs:
    """What a prompt and its image need for one vision-language model."""

    image_token_id: int
    tokens: int  # placeholders per image: the projector's output positions
    size: int  # the tower's square input side, pixels
    mean: tuple[float, float, float] = CLIP_MEAN
    std: tuple[float, float, float] = CLIP_STD

    @classmethod
    def of(cls, model: Any, folder: str | Path | None = None) -> VisionInputs | None:
        """From a (possibly wrapped) model's config; None for a text-only model. A folder's
        preprocessor_config.json, when present, gives the mean and std it was trained with."""
        config = getattr(model, "config", None)
        vision = getattr(config, "vision_config", None)
        if config is None or vision is None:
            return None
        side, patch = int(vision.image_size), int(vision.patch_size)
        # Llava's "default" strategy drops the CLS position, "full" keeps it.
        cls_kept = getattr(config, "vision_feature_select_strategy", "default") == "full"
        token = getattr(config, "image_token_id", None)
        if token is None:
            token = config.image_token_index
        mean, std = CLIP_MEAN, CLIP_STD
        pre = Path(folder) / "preprocessor_config.json" if folder else None
        if pre is not None and pre.is_file():
            saved = json.loads(pre.read_text(encoding="utf-8"))
            mean = tuple(saved.get("image_mean", mean))
            std = tuple(saved.get("image_std", std))
        return cls(int(token), (side // patch) ** 2 + int(cls_kept), side, mean, std)

    def pixels(self, source: bytes | str | Path) -> torch.Tensor:
        """[3, S, S] float32 pixel values of one image."""
        import torch

        image = read_image(source).resize((self.size, self.size), Image.Resampling.BICUBIC)
        array = np.asarray(image, dtype=np.float32) / np.float32(255.0)  # [S, S, 3]
        mean, std = np.asarray(self.mean, np.float32), np.asarray(self.std, np.float32)
        return torch.from_numpy((array - mean) / std).permute(2, 0, 1).contiguous()
