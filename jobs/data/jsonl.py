"""The user's own data: a JSONL file of training rows (`jobs/spec/rows.py`: numtune's
{"prompt", "answer"} or OpenAI's chat {"messages": [...]}), on local disk or in storage.

A bad row is an error naming the file and line, never a silent skip.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from jobs.data.types import DataError, Example
from jobs.spec.rows import RowError, parse_row
from jobs.storage import read_uri_text


def _lines(path: str | Path) -> Iterable[str]:
    # Uploaded files live in the storage root, which may be an object store URI.
    if "://" in str(path):
        return read_uri_text(str(path)).splitlines()
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{file}: no such file (data.path / data.eval_path)")
    return file.read_text(encoding="utf-8").splitlines()


def read_jsonl(path: str | Path) -> list[Example]:
    out = []
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        try:
            prompt, answer = parse_row(line)
        except RowError as error:
            raise DataError(f"{path}:{number}: {error}") from None
        out.append(Example(prompt, answer))
    if not out:
        raise DataError(f"{path}: the file has no rows")
    return out
