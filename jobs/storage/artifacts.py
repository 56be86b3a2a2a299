"""Verified copies of registered model versions: only the listed files, every byte hashed.

A registry version is a folder plus a {relative path: sha256} list kept in the service's
database. Loading it must read exactly the bytes that were checked: hashing the files in
place and loading them afterwards would let a file change in between, and loading the
folder would pick up any extra file dropped into it. So the listed files, and only those,
are streamed into a private temporary folder (0700), hashed on the way, and the loader
reads that copy. Both the Ray job (`registry:` model sources) and serving use this.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pyarrow.fs as pafs

CHUNK = 1 << 20
SHA256 = re.compile(r"^[0-9a-f]{64}$")


def sha256_file(path: Path) -> str:
    """A local file's sha256, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


class ArtifactIntegrityError(RuntimeError):
    """A listed file is missing, is a symlink, or its bytes do not match its sha256."""


def safe_relative(rel: str) -> bool:
    """A listed name must stay inside the version folder: relative, no '..', no backslash."""
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and "\\" not in rel and ".." not in parts


def _open_source(fs: pafs.FileSystem, path: str) -> pafs.NativeFile:
    if isinstance(fs, pafs.LocalFileSystem) and os.path.islink(path):
        # A symlink could point anywhere on the host; registration never stores one.
        raise ArtifactIntegrityError(f"{path} is a symlink; refusing to load it")
    return fs.open_input_stream(path)


def copy_verified(
    fs: pafs.FileSystem, folder: str, files: Mapping[str, str], dest: Path, *, label: str
) -> None:
    """Stream each listed file of `folder` (a path inside `fs`) into `dest`, hashing it;
    ArtifactIntegrityError naming `label` on any missing file or sha256 mismatch."""
    for rel, expected in files.items():
        if not safe_relative(rel) or not SHA256.match(expected):
            raise ArtifactIntegrityError(f"{label}: listed file {rel!r} is not a safe entry")
        source = posixpath.join(folder, rel)
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        try:
            with _open_source(fs, source) as inp, target.open("wb") as out:
                while block := inp.read(CHUNK):
                    digest.update(block)
                    out.write(block)
        except FileNotFoundError as error:
            raise ArtifactIntegrityError(f"{label}: artifact file {rel} is missing") from error
        if digest.hexdigest() != expected:
            raise ArtifactIntegrityError(
                f"{label}: artifact file {rel} fails its sha256 check "
                "(changed since registration); refusing to load it"
            )


@contextmanager
def verified_folder(
    uri: str, files: Mapping[str, str], *, label: str, parent: Path | None = None
) -> Iterator[Path]:
    """A private temporary folder holding the verified copy of the version at `uri` (a
    local folder or a pyarrow URI); removed when the block ends (loaded weights and
    tokenizers live in memory by then)."""
    fs, folder = pafs.FileSystem.from_uri(uri if "://" in uri else os.path.abspath(uri))
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="verified-", dir=parent))  # mode 0700
    try:
        copy_verified(fs, folder.rstrip("/"), files, tmp, label=label)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
