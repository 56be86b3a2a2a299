"""The user's own data: a JSONL file of {"prompt": ..., "answer": ...} rows.

A bad row is an error naming the file and line, never a silent skip.
"""

from __future__ import annotations

import json
from pathlib import Path

from jobs.data.types import DataError, Example


def read_jsonl(path: str | Path) -> list[Example]:
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{file}: no such file (data.path / data.eval_path)")
    out = []
    with file.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataError(f"{file}:{number}: not valid JSON ({error.msg})") from None
            if not isinstance(row, dict):
                raise DataError(f"{file}:{number}: a row must be a JSON object")
            prompt, answer = row.get("prompt"), row.get("answer")
            if not isinstance(prompt, str) or not prompt.strip():
                raise DataError(f"{file}:{number}: 'prompt' must be a non-empty string")
            if isinstance(answer, bool) or not isinstance(answer, str | int | float):
                raise DataError(f"{file}:{number}: 'answer' must be a string or a number")
            if not str(answer).strip():
                raise DataError(f"{file}:{number}: 'answer' is empty")
            out.append(Example(prompt, str(answer)))
    if not out:
        raise DataError(f"{file}: the file has no rows")
    return out
