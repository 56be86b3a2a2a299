"""Reading a table file: CSV (a header line, then rows) or JSONL (one flat JSON object per
line), told apart by the first non-blank byte (`{`: JSONL).

`TableParser` is fed the file's bytes in chunks and keeps at most one record of them
(MAX_RECORD bytes), so the upload check (service/files/uploads.py), the submit check and the
job read a file by the same rules without holding more than one line of it: a 50 MB line
is refused once its first MiB has arrived. A problem names the row (data rows count from
1, the header excluded) and the line, and the column where there is one.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from jobs.data.types import DataError
from jobs.storage.uri import open_uri

CHUNK_BYTES = 1 << 16  # read at a time
MAX_RECORD = 1 << 20  # bytes in one row (a CSV row may span lines inside quotes)
MAX_COLUMNS = 500
MAX_PROBLEMS = 5
Row = list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's keys, refusing a repeated one (json keeps the last, silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate column {key!r}")
        out[key] = value
    return out


def _cell(value: object, column: str) -> str:
    """A JSON value as the text the prompt shows; null is a missing value ("")."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise ValueError(f"column {column!r}: a nested value (a table cell is text or a number)")


@dataclass
class TableParser:
    """Feed bytes, then `finish()`; `columns` and (with `keep`) `rows`, or `problems`."""

    name: str
    keep: bool = True
    # Called with each good row and where it is ("<name>: row N (line L)"), kept or not.
    on_row: Callable[[Row, str], None] | None = None
    columns: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # the line each kept row starts on
    count: int = 0  # data rows read
    problems: list[str] = field(default_factory=list)
    format: Literal["csv", "jsonl"] | None = None
    stopped: bool = False  # a problem after which the rest cannot be read row by row
    _line: int = 0
    _start: int = 1  # the line the record being gathered starts on
    _pending: bytearray = field(default_factory=bytearray)
    _quotes: int = 0  # `"` seen in the CSV record being gathered (odd: inside a quote)

    @property
    def full(self) -> bool:
        return self.stopped or len(self.problems) >= MAX_PROBLEMS

    def feed(self, chunk: bytes) -> None:
        *lines, rest = chunk.split(b"\n")
        for line in lines:
            if self.full:
                return
            self._line += 1
            self._gather(line, complete=True)
        if rest and not self.full:
            self._gather(rest, complete=False)

    def finish(self) -> None:
        if self._pending and not self.full:  # the last line, or a quote never closed
            self._line += 1
            self._record(bytes(self._pending))
        if not self.problems and not self.count:
            self.problems.append(f"{self.name}: the table has no rows")

    def _gather(self, piece: bytes, complete: bool) -> None:
        """Add a line (or, when not complete, the start of one) to the current record."""
        if not self._pending:
            self._start = self._line + (0 if complete else 1)
        self._pending += piece
        self._quotes += piece.count(b'"')
        start = self._pending.lstrip(b"\xef\xbb\xbf \t\r")  # a UTF-8 BOM, blanks
        if self.format is None and start:  # JSONL's quotes may be escaped: never count them
            self.format = "jsonl" if start.startswith(b"{") else "csv"
        if len(self._pending) > MAX_RECORD:
            self._problem(f"a row longer than {MAX_RECORD} bytes", row=False)
            self.stopped = True
            return
        if not complete:
            return
        if self.format != "jsonl" and self._quotes % 2:  # a quoted value goes on: one record
            self._pending += b"\n"
            return
        record, self._pending, self._quotes = bytes(self._pending), bytearray(), 0
        self._record(record)

    def _record(self, raw: bytes) -> None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            at = f"byte {error.start + 1} of the line"
            self._problem(f"not UTF-8 text ({at}): save the table as UTF-8", row=False)
            self.stopped = not self.columns
            return
        text = text.removeprefix("\ufeff").rstrip("\r") if not self.columns else text
        if not text.strip():
            return
        if self.format == "csv":
            self._csv(text.rstrip("\r"))
        else:
            self._jsonl(text)

    def _csv(self, text: str) -> None:
        try:
            cells = next(csv.reader([text], strict=True))
        except csv.Error as error:
            self._problem(f"not a CSV row ({error})", row=bool(self.columns))
            self.stopped = not self.columns
            return
        if not self.columns:
            self._header([c.strip() for c in cells])
        elif len(cells) != len(self.columns):
            self._problem(f"{len(cells)} values for {len(self.columns)} columns (a ragged row)")
        else:
            self._add(cells)

    def _jsonl(self, text: str) -> None:
        try:
            obj = json.loads(text, object_pairs_hook=_pairs)
            if not isinstance(obj, dict):
                raise ValueError("a row must be a JSON object of column: value")
            cells = {str(k): _cell(v, str(k)) for k, v in obj.items()}
        except json.JSONDecodeError as error:
            return self._problem(f"not valid JSON ({error.msg})")
        except RecursionError:
            return self._problem("nested too deeply to be a table row")
        except ValueError as error:
            return self._problem(str(error))
        if not self.columns:
            self._header(list(cells))
            if self.stopped:
                return
        missing = [c for c in self.columns if c not in cells]
        extra = [c for c in cells if c not in self.columns]
        if missing:
            self._problem(f"missing column {missing[0]!r} (the first row has it)")
        elif extra:
            self._problem(f"column {extra[0]!r} is not in the first row (a ragged row)")
        else:
            self._add([cells[c] for c in self.columns])

    def _header(self, names: list[str]) -> None:
        seen: dict[str, int] = {}
        for i, name in enumerate(names, start=1):
            if not name:
                self._problem(f"column {i} has no name (a missing column name)", row=False)
            elif name in seen:
                self._problem(f"duplicate column {name!r} (columns {seen[name]} and {i})", False)
            seen.setdefault(name, i)
        if len(names) > MAX_COLUMNS:
            self._problem(f"{len(names)} columns; at most {MAX_COLUMNS}", row=False)
        self.columns = names
        self.stopped = bool(self.problems)

    def _add(self, cells: Row) -> None:
        self.count += 1
        row = [c.strip() for c in cells]
        if self.keep:
            self.rows.append(row)
            self.lines.append(self._start)
        if self.on_row is not None:
            self.on_row(row, f"{self.name}: row {self.count} (line {self._start})")

    def _problem(self, why: str, row: bool = True) -> None:
        where = f"row {self.count + 1} (line {self._start})" if row else f"line {self._start}"
        self.problems.append(f"{self.name}: {where}: {why}")
        if row:
            self.count += 1  # the bad row still counts, so the next one is named right


def read_into(parser: TableParser, location: str) -> TableParser:
    """Feed a local file or storage URI through `parser` in chunks, then finish; DataError
    with its first problems (or for a missing file)."""
    if "://" not in location and not Path(location).is_file():
        raise DataError(f"{parser.name}: no such file (data.path / data.eval_path)")
    opened = open_uri(location) if "://" in location else open(location, "rb")  # noqa: SIM115
    with opened as stream:
        while (chunk := stream.read(CHUNK_BYTES)) and not parser.full:
            parser.feed(chunk)
    parser.finish()
    if parser.problems:
        raise DataError("; ".join(parser.problems))
    return parser
