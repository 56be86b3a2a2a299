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
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from jobs.data.types import DataError, Example
from jobs.modeling.vision import ImageError, read_image
from jobs.spec import FILE_ID
from jobs.spec.rows import RowError, parse_row
from jobs.storage.uri import open_uri, read_uri_bytes

# An uploaded image's id -> its stored location (a local path or a storage URI), or None
# when the caller has no such image.
ImageFiles = Callable[[str], str | None]
CHUNK = 1 << 16  # bytes read at a time: a reader holds about this much and one line


def _lines(path: str | Path) -> Iterator[bytes]:
    """The file's lines (split at "\n", as an upload is checked), read in chunks: a large
    file is never held whole. Uploaded files live in the storage root, which may be an
    object store URI."""
    if "://" not in str(path) and not Path(path).is_file():
        raise DataError(f"{path}: no such file (data.path / data.eval_path)")
    opened = open_uri(str(path)) if "://" in str(path) else open(path, "rb")  # noqa: SIM115
    with opened as stream:
        pieces: list[bytes] = []
        while chunk := stream.read(CHUNK):
            *lines, rest = chunk.split(b"\n")
            if lines:
                yield b"".join([*pieces, lines[0]])
                yield from lines[1:]
                pieces = []
            pieces.append(rest)
        if last := b"".join(pieces):
            yield last


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


def examples(
    path: str | Path,
    allowed: Callable[[str], bool] | None = None,
    files: ImageFiles | None = None,
) -> Iterator[Example]:
    """The file's examples one by one, every image read once to check it; DataError naming
    file and line for a bad row, and for a file with none. `allowed(image path)`: whether a
    row may read that image (the control plane passes its data roots); `files`: where the
    uploaded images that rows name by id are."""
    found = False
    for number, raw in enumerate(_lines(path), start=1):
        if not raw.strip():
            continue
        try:
            prompt, answer, image = read_row(raw)
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
        found = True
        yield Example(prompt, answer, source)
    if not found:
        raise DataError(f"{path}: the file has no rows")


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RowError("not UTF-8 text") from None


def read_row(raw: bytes) -> tuple[str, str, str | None]:
    """parse_row of one line's bytes, refusing too what JSON accepts but no job can use: an
    integer past Python's 4,300-digit limit on int <-> text (json raises a bare ValueError,
    the job would never read it) and a lone surrogate escape ("\\ud800": valid JSON, but
    no UTF-8 text, so the tokenizer fails on it mid-run). The upload and the job both read
    rows through this."""
    try:
        row = parse_row(_text(raw))
    except RowError:
        raise
    except ValueError:  # int(text) past sys.get_int_max_str_digits()
        limit = sys.get_int_max_str_digits()
        raise RowError(f"an integer of more than {limit} digits: too long to read") from None
    for value in row:
        try:
            (value or "").encode("utf-8")
        except UnicodeEncodeError:
            raise RowError("a lone surrogate escape (\\ud800-\\udfff) is not text") from None
    return row


def read_jsonl(
    path: str | Path,
    allowed: Callable[[str], bool] | None = None,
    files: ImageFiles | None = None,
) -> list[Example]:
    """All of the file's examples (see `examples`)."""
    return list(examples(path, allowed, files))


def check_jsonl(
    path: str | Path,
    allowed: Callable[[str], bool] | None = None,
    files: ImageFiles | None = None,
) -> int:
    """The number of examples, reading the file through without keeping any (see `examples`)."""
    return sum(1 for _ in examples(path, allowed, files))


def check_rows(
    path: str | Path,
    allowed: Callable[[str], bool] | None = None,
    files: ImageFiles | None = None,
) -> tuple[int, int]:
    """(examples, those with an image), reading the file through without keeping any."""
    count = images = 0
    for example in examples(path, allowed, files):
        count += 1
        images += example.image is not None
    return count, images
