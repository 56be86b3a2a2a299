"""The registry's files: where checkpoints may come from and how a version's folder is made.

A checkpoint must lie inside its job's own run folder (no `..`, no symlinks out of it).
Registering copies only its serving files (never pickled trainer state), hashing each as it
goes, into a staging folder that is then published whole under `registry/<name>/v<N>/`.
"""

from __future__ import annotations

import hashlib
import os
import posixpath

import pyarrow.fs as pafs

CHUNK = 1 << 20
PICKLED = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt")


class ArtifactError(Exception):
    """An artifact that must not be served or registered: tampered, missing, outside storage."""


def _refuse_symlinks(folder: str) -> None:
    """Any symlink in a checkpoint, to a file or a folder, could point anywhere on the host:
    none is registered. os.walk lists a linked folder without entering it."""
    for top, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            if os.path.islink(os.path.join(top, name)):
                rel = os.path.relpath(os.path.join(top, name), folder)
                raise ArtifactError(f"{rel}: symlinks are not registered")


class RegistryFiles:
    """The storage root (a local folder or an object store URI) as the registry uses it."""

    def __init__(self, storage_root: str):
        self.uri = storage_root if "://" in storage_root else os.path.abspath(storage_root)
        self.fs, base = pafs.FileSystem.from_uri(self.uri)
        self.base = base.rstrip("/")
        self.local = isinstance(self.fs, pafs.LocalFileSystem)

    def confined_checkpoint(self, job_id: str, checkpoint: str) -> str:
        """The checkpoint's path inside the filesystem, refused unless it lies in the job's
        run folder. `checkpoint` is a URI, an absolute path or a path relative to the run."""
        run = f"{self.base}/runs/{job_id}"
        if ".." in checkpoint.split("/") or "\\" in checkpoint:
            raise ArtifactError(f"checkpoint {checkpoint!r}: '..' is not allowed")
        location = checkpoint.partition("?")[0]
        if "://" in location:
            path = location.split("://", 1)[1]
        elif location.startswith("/"):
            path = location
        else:
            path = f"{run}/{location}"
        path = posixpath.normpath(path if path.startswith("/") or not self.local else "/" + path)
        inside = path.lstrip("/").startswith(run.lstrip("/") + "/")
        if self.local and inside and "\0" not in path:
            real, real_run = os.path.realpath(path), os.path.realpath(run)
            inside = real.startswith(real_run + os.sep)
        if not inside or "\0" in path:  # a NUL names no file; the OS would raise ValueError
            raise ArtifactError(
                f"checkpoint {checkpoint!r} is not inside job {job_id}'s run folder"
            )
        if self.fs.get_file_info(path).type != pafs.FileType.Directory:
            raise ArtifactError(f"checkpoint {checkpoint!r} does not exist")
        return path

    def copy(self, src: str, dest: str) -> dict[str, str]:
        """Copy the serving files of folder `src` to `dest`; {relative path: sha256}."""
        if self.local:
            _refuse_symlinks(src)
        infos = self.fs.get_file_info(pafs.FileSelector(src, recursive=True))
        files: dict[str, str] = {}
        for info in infos:
            if info.type != pafs.FileType.File or info.path.endswith(PICKLED):
                continue
            rel = info.path[len(src) :].lstrip("/")
            digest = hashlib.sha256()
            self.fs.create_dir(posixpath.dirname(f"{dest}/{rel}"), recursive=True)
            with (
                self.fs.open_input_stream(info.path) as inp,
                self.fs.open_output_stream(f"{dest}/{rel}") as out,
            ):
                while block := inp.read(CHUNK):
                    digest.update(block)
                    out.write(block)
            files[rel] = digest.hexdigest()
        if not any(name.endswith(".safetensors") for name in files):
            raise ArtifactError(f"{src} holds no .safetensors weights")
        return files

    def publish(self, staging: str, final: str) -> None:
        self.fs.create_dir(posixpath.dirname(final), recursive=True)
        if self.local:
            self.fs.move(staging, final)  # one rename: the folder appears whole
        else:  # object stores cannot rename a folder: copy its objects, then drop staging
            pafs.copy_files(
                staging, final, source_filesystem=self.fs, destination_filesystem=self.fs
            )
            self.fs.delete_dir(staging)

    def remove(self, *folders: str | None) -> None:
        """Drop folders that exist (what a failed registration left, a deleted version)."""
        for folder in folders:
            if folder is not None and self.fs.get_file_info(folder).type != pafs.FileType.NotFound:
                self.fs.delete_dir(folder)
