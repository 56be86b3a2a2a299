"""The user's own data: a JSONL file of training rows (`jobs/spec/rows.py`: numtune's
{"prompt", "answer"} or OpenAI's chat {"messages": [...]}), on local disk or in storage.
A row may name an image file (absolute, or relative to the JSONL file's folder).
A bad row, or an image that is missing or unreadable, is an error naming the file and line,
never a silent skip.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from jobs.data.types import DataError, Example
from jobs.spec.rows import RowError, parse_row
from jobs.storage import read_uri_text
from jobs.vision import ImageError, read_image


def _lines(path: str | Path) -> Iterable[str]:
    # Uploaded files live in the storage root, which may be an object store URI.
    if "://" in str(path):
        return read_uri_text(str(path)).splitlines()
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{file}: no such file (data.path / data.eval_path)")
    return file.read_text(encoding="utf-8").splitlines()


def image_path(image: str, jsonl: str | Path) -> str:
    """A row's image path as a file path: relative ones from the JSONL file's folder."""
    if os.path.isabs(image) or "://" in str(jsonl):
        return image
    return str(Path(jsonl).parent / image)


def read_jsonl(path: str | Path, allowed: Callable[[str], bool] | None = None) -> list[Example]:
    """The file's examples, every image read once to check it. `allowed(image path)`:
    whether a row may read that image (the control plane passes its data roots)."""
    out = []
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        try:
            prompt, answer, image = parse_row(line)
            if image is not None:
                image = image_path(image, path)
                if allowed is not None and not allowed(image):
                    raise RowError(f"image {image!r} is not a file inside the data roots")
                read_image(image)
        except (RowError, ImageError) as error:
            raise DataError(f"{path}:{number}: {error}") from None
        out.append(Example(prompt, answer, image))
    if not out:
        raise DataError(f"{path}: the file has no rows")
    return out
