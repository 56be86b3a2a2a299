"""Uploaded files on storage: `<storage>/files/<owner>/<file id>.jsonl` (training rows,
purpose fine-tune), `<file id>.<csv|jsonl>` (a table, purpose table) or
`<file id>.<png|jpeg|gif|bmp|webp>` (an image, purpose vision).

An upload is streamed in chunks to a staging name beside its final one, hashed and checked
as it goes: row by row (`jobs/spec/rows.py`, the parser the job itself reads with; a table
by `jobs/data/table_file.py`, the job's table reader), or, for an image, held (at most
MAX_IMAGE_BYTES) and checked whole by `jobs.modeling.vision.read_image`, the rules every
image numtune reads passes. It is moved into place only when the check passed
and the size stayed under the cap; otherwise the staging file is removed, so a refused
upload leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from dataclasses import dataclass, field
from typing import BinaryIO

import pyarrow.fs as pafs

from jobs.data.jsonl import read_row
from jobs.data.table_file import TableParser
from jobs.modeling.vision import MAX_IMAGE_BYTES, ImageError, image_format
from jobs.spec.rows import RowError
from jobs.storage.uri import join_uri

CHUNK = 1 << 20
MAX_PROBLEMS = 5  # bad rows named per refused upload


class TooLargeError(Exception):
    """The file is larger than the upload cap."""


class OverQuotaError(TooLargeError):
    """The file would take its owner past their storage quota."""


class BadRowsError(Exception):
    """Rows that are not training examples: `problems` are "name:line: why" (the first few)."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass
class RowChecker:
    """Checks complete lines as chunks arrive; a line may span chunks."""

    name: str
    rows: int = 0
    line: int = 0
    problems: list[str] = field(default_factory=list)
    suffix: str = "jsonl"
    _rest: bytes = b""

    def feed(self, chunk: bytes) -> None:
        *lines, self._rest = (self._rest + chunk).split(b"\n")
        for raw in lines:
            self._check(raw)

    def finish(self) -> None:
        if self._rest:
            self._check(self._rest)
        if not self.rows and not self.problems:
            self.problems.append(f"{self.name}: the file has no rows")

    @property
    def full(self) -> bool:
        return len(self.problems) >= MAX_PROBLEMS

    def _check(self, raw: bytes) -> None:
        self.line += 1
        if not raw.strip():
            return
        try:
            read_row(raw)
        except RowError as error:
            self.problems.append(f"{self.name}:{self.line}: {error}")
        else:
            self.rows += 1


@dataclass
class ImageChecker:
    """Holds an image's bytes as chunks arrive (refusing past MAX_IMAGE_BYTES, before the
    upload cap) and checks them whole at the end; `suffix` is then its format's name."""

    name: str
    rows: int = 0  # an image holds no training rows
    problems: list[str] = field(default_factory=list)
    suffix: str = ""
    _data: bytearray = field(default_factory=bytearray)

    def feed(self, chunk: bytes) -> None:
        if len(self._data) + len(chunk) > MAX_IMAGE_BYTES:
            self.problems.append(f"{self.name}: the image is larger than {MAX_IMAGE_BYTES} bytes")
        else:
            self._data += chunk

    def finish(self) -> None:
        if self.problems:
            return
        try:
            self.suffix = image_format(bytes(self._data)).lower()
        except ImageError as error:
            self.problems.append(f"{self.name}: {error}")

    @property
    def full(self) -> bool:
        return bool(self.problems)


@dataclass
class TableChecker:
    """A table's rows checked as chunks arrive (at most one row held: a 50 MB line is
    refused after its first MiB); `suffix` is its format, csv or jsonl."""

    name: str
    parser: TableParser = field(init=False)

    def __post_init__(self) -> None:
        self.parser = TableParser(self.name, keep=False)

    def feed(self, chunk: bytes) -> None:
        self.parser.feed(chunk)

    def finish(self) -> None:
        self.parser.finish()

    @property
    def full(self) -> bool:
        return self.parser.full

    @property
    def problems(self) -> list[str]:
        return self.parser.problems

    @property
    def rows(self) -> int:
        return self.parser.count

    @property
    def suffix(self) -> str:
        return self.parser.format or "csv"


@dataclass(frozen=True)
class Stored:
    location: str  # a local path, or a URI under an object store root
    bytes: int
    sha256: str
    rows: int


class Uploads:
    def __init__(self, storage_root: str, max_bytes: int):
        self.uri = storage_root if "://" in storage_root else os.path.abspath(storage_root)
        self.fs, base = pafs.FileSystem.from_uri(self.uri)
        self.base = base.rstrip("/")
        self.local = isinstance(self.fs, pafs.LocalFileSystem)
        self.max_bytes = max_bytes

    def folder(self, owner: str) -> str:
        return f"{self.base}/files/{owner}"

    def store(
        self,
        owner: str,
        file_id: str,
        source: BinaryIO,
        name: str,
        image: bool = False,
        quota_left: int | None = None,
        table: bool = False,
    ) -> Stored:
        """Copy `source` (JSONL rows, or an image) to the owner's files; TooLargeError (past
        the cap), OverQuotaError (past `quota_left` bytes) or BadRowsError leave nothing."""
        folder = self.folder(owner)
        self.fs.create_dir(folder, recursive=True)
        staging = f"{folder}/.{file_id}.part"
        checker: RowChecker | ImageChecker | TableChecker = (
            ImageChecker(name) if image else TableChecker(name) if table else RowChecker(name)
        )
        digest, size = hashlib.sha256(), 0
        done = False
        try:
            with self.fs.open_output_stream(staging) as out:
                while (chunk := source.read(CHUNK)) and not checker.full:
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise TooLargeError(f"files are limited to {self.max_bytes} bytes")
                    if quota_left is not None and size > quota_left:
                        raise OverQuotaError(
                            f"this file would pass your storage quota ({quota_left} bytes "
                            "left, your files and run folders counted); delete files or "
                            "jobs you no longer need"
                        )
                    digest.update(chunk)
                    checker.feed(chunk)
                    out.write(chunk)
            checker.finish()
            if checker.problems:
                raise BadRowsError(checker.problems)
            final = f"{file_id}.{checker.suffix}"
            self.fs.move(staging, f"{folder}/{final}")
            done = True
        finally:
            if not done:
                self.remove(staging)
        location = f"{folder}/{final}" if self.local else join_uri(self.uri, "files", owner, final)
        return Stored(location, size, digest.hexdigest(), checker.rows)

    def read(self, location: str, limit: int) -> bytes:
        """At most `limit` + 1 bytes of a stored file: one more than allowed tells the reader
        it is too large without reading it whole."""
        with self.fs.open_input_stream(self.path_of(location)) as stream:
            return bytes(stream.read(limit + 1))

    def path_of(self, location: str) -> str:
        """The path inside the filesystem of a stored file's location."""
        return location.partition("?")[0].split("://", 1)[-1] if not self.local else location

    def confined(self, location: str, owner: str) -> str | None:
        """The location if it is a file in `owner`'s folder (symlinks followed), else None."""
        path = self.path_of(location)
        folder = self.folder(owner)
        if self.local:
            real, real_folder = os.path.realpath(path), os.path.realpath(folder)
            ok = posixpath.dirname(real) == real_folder and os.path.isfile(real)
            return real if ok else None
        inside = posixpath.dirname(path) == folder and ".." not in path.split("/")
        found = inside and self.fs.get_file_info(path).type == pafs.FileType.File
        return location if found else None

    def remove(self, location: str) -> None:
        path = self.path_of(location)
        if self.fs.get_file_info(path).type != pafs.FileType.NotFound:
            self.fs.delete_file(path)
