"""The user's own data: a JSONL file of training rows (`jobs/spec/rows.py`: numtune's
{"prompt", "answer"} or OpenAI's chat {"messages": [...]}), on local disk or in storage.
A row may name an image file (absolute, or relative to the JSONL file's folder), or an
image uploaded to /v1/files with purpose vision by its id ("image": "file-<24 hex>"): the
control plane resolves the ids at submit, for the caller's own images only, and pins their
stored locations in the spec (data.images), which is all the job reads them through.
A bad row, or an image that is missing or unreadable, is an error naming the file and line,
never a silent skip.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from jobs.data.types import DataError, Example
from jobs.spec import FILE_ID
from jobs.spec.rows import RowError, parse_row
from jobs.storage import read_uri_bytes, read_uri_text
from jobs.vision import ImageError, read_image

# An uploaded image's id -> its stored location (a local path or a storage URI), or None
# when the caller has no such image.
ImageFiles = Callable[[str], str | None]


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


def uploaded_image(file_id: str, files: ImageFiles | None) -> bytes | str:
    """An uploaded image, checked: its local path, or its bytes when it is in an object
    store (read_image reads local files only)."""
    where = None if files is None else files(file_id)
    if where is None:
        raise RowError(f"no image file {file_id!r} (upload it to /v1/files, purpose vision)")
    source = read_uri_bytes(where) if "://" in where else where
    read_image(source)
    return source


def read_jsonl(
    path: str | Path,
    allowed: Callable[[str], bool] | None = None,
    files: ImageFiles | None = None,
) -> list[Example]:
    """The file's examples, every image read once to check it. `allowed(image path)`:
    whether a row may read that image (the control plane passes its data roots); `files`:
    where the uploaded images that rows name by id are."""
    out = []
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        try:
            prompt, answer, image = parse_row(line)
            source: bytes | str | None = image
            if image is not None and re.match(FILE_ID, image):
                source = uploaded_image(image, files)
            elif image is not None:
                source = image_path(image, path)
                if allowed is not None and not allowed(source):
                    raise RowError(f"image {source!r} is not a file inside the data roots")
                read_image(source)
        except (RowError, ImageError) as error:
            raise DataError(f"{path}:{number}: {error}") from None
        out.append(Example(prompt, answer, source))
    if not out:
        raise DataError(f"{path}: the file has no rows")
    return out
