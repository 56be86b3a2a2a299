"""Uploaded training files on storage: `<storage>/files/<owner>/<file id>.jsonl`.

An upload is streamed in chunks to a staging name beside its final one, hashed and checked
row by row as it goes (`jobs/spec/rows.py`, the parser the job itself reads with), and
moved into place only when every row passed and the size stayed under the cap; otherwise
the staging file is removed, so a refused upload leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from dataclasses import dataclass, field
from typing import BinaryIO

import pyarrow.fs as pafs

from jobs.spec.rows import RowError, parse_row
from jobs.storage import join_uri

CHUNK = 1 << 20
MAX_PROBLEMS = 5  # bad rows named per refused upload


class TooLargeError(Exception):
    """The file is larger than the upload cap."""


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
            parse_row(raw.decode("utf-8"))
        except UnicodeDecodeError:
            self.problems.append(f"{self.name}:{self.line}: not UTF-8 text")
        except RowError as error:
            self.problems.append(f"{self.name}:{self.line}: {error}")
        else:
            self.rows += 1


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

    def store(self, owner: str, file_id: str, source: BinaryIO, name: str) -> Stored:
        """Copy `source` to the owner's files; TooLargeError or BadRowsError leave nothing."""
        folder = self.folder(owner)
        self.fs.create_dir(folder, recursive=True)
        staging, final = f"{folder}/.{file_id}.part", f"{folder}/{file_id}.jsonl"
        checker, digest, size = RowChecker(name), hashlib.sha256(), 0
        done = False
        try:
            with self.fs.open_output_stream(staging) as out:
                while (chunk := source.read(CHUNK)) and not checker.full:
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise TooLargeError(f"files are limited to {self.max_bytes} bytes")
                    digest.update(chunk)
                    checker.feed(chunk)
                    out.write(chunk)
            checker.finish()
            if checker.problems:
                raise BadRowsError(checker.problems)
            self.fs.move(staging, final)
            done = True
        finally:
            if not done:
                self.remove(staging)
        location = final if self.local else join_uri(self.uri, "files", owner, f"{file_id}.jsonl")
        return Stored(location, size, digest.hexdigest(), checker.rows)

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
