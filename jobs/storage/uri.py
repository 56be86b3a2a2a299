"""Files named by a local path or any pyarrow filesystem URI (s3://, gs://), options after `?`
(an s3 endpoint and the like) kept last.

pyarrow is imported on first use: `jobs.spec` reads spec files through here, and the CLI
that validates a spec file should not pay for pyarrow at start-up.
"""

from __future__ import annotations

from typing import Any


def join_uri(base: str, *parts: str) -> str:
    """Append path parts to a folder or URI, keeping any ?options (s3 endpoint etc.) last."""
    location, sep, options = base.partition("?")
    return "/".join([location.rstrip("/"), *parts]) + sep + options


def open_uri(uri: str) -> Any:
    """An input stream (a pyarrow NativeFile, a context manager) on a file named by a pyarrow
    filesystem URI (options after `?` kept)."""
    import pyarrow.fs as pafs

    location, sep, options = uri.partition("?")
    folder, _, name = location.rpartition("/")
    fs, path = pafs.FileSystem.from_uri(folder + sep + options)
    return fs.open_input_stream(f"{path.rstrip('/')}/{name}")


def read_uri_bytes(uri: str) -> bytes:
    """A whole file named by a pyarrow filesystem URI (options after `?` kept)."""
    with open_uri(uri) as inp:
        return bytes(inp.readall())


def read_uri_text(uri: str) -> str:
    return read_uri_bytes(uri).decode("utf-8")
