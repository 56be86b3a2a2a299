"""A run's provenance: numtune's version and commit, the exact spec, the sha256 of the data
files the spec names, and the decoding of its evaluation.

Nothing here may fail a run: a figure that cannot be found is "unknown" (with the reason
for a data file). The commit is NUMTUNE_COMMIT when set (an image built without .git sets
it at build time), else the git checkout the `jobs` package runs from, "+dirty" when its
tracked files differ from that commit.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import logging
import os
import subprocess
from pathlib import Path

from jobs.records.models import Decoding, Provenance
from jobs.spec import JobSpec
from jobs.spec.table import table_location  # bundled:<name> tables hash their package's file
from jobs.storage.uri import read_uri_bytes

log = logging.getLogger(__name__)

UNKNOWN = "unknown"
PACKAGE = Path(__file__).resolve().parents[1]  # the jobs/ package itself: git finds its checkout


def numtune_version() -> str:
    try:
        return importlib.metadata.version("numtune")
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20, check=True
    )
    return done.stdout.strip()


@functools.cache
def git_commit(source: Path | None = None) -> str:
    """The commit of the numtune checkout at `source` (by default the checkout that holds this
    `jobs/` package); "unknown" outside a git checkout of it (an installed wheel inside some
    other repository does not count: its top folder must be `source`, or hold this package)."""
    if pinned := os.environ.get("NUMTUNE_COMMIT"):
        return pinned
    where = PACKAGE if source is None else source.resolve()
    try:
        top = Path(_git("rev-parse", "--show-toplevel", cwd=where)).resolve()
        if top != where and (top / PACKAGE.name).resolve() != PACKAGE:
            return UNKNOWN
        head = _git("rev-parse", "HEAD", cwd=top)
        dirty = _git("status", "--porcelain", "--untracked-files=no", cwd=top)
    except (OSError, subprocess.SubprocessError) as error:
        log.info("no git commit for %s: %s", source, error)
        return UNKNOWN
    return head + ("+dirty" if dirty else "")


def sha256_of(location: str) -> str:
    """The hex sha256 of a local file or storage URI; "unknown (why)" when unreadable."""
    digest = hashlib.sha256()
    try:
        if "://" in location:
            digest.update(read_uri_bytes(location))
        else:
            with open(location, "rb") as file:
                for block in iter(lambda: file.read(1 << 20), b""):
                    digest.update(block)
    except (OSError, ValueError) as error:  # pyarrow's IO errors are OSErrors
        return f"{UNKNOWN} ({type(error).__name__}: {error})"[:500]
    return digest.hexdigest()


def data_files(spec: JobSpec) -> list[str]:
    """The data files a spec names: its JSONL files and the uploaded images they use."""
    named = [spec.data.path, spec.data.eval_path, *sorted((spec.data.images or {}).values())]
    return list(dict.fromkeys(p for p in named if p))


def decoding_of(spec: JobSpec) -> Decoding:
    return Decoding(
        number_first=spec.train.eval_decoding == "number_first",
        max_new_tokens=spec.train.eval_max_new_tokens,
        use_chat_template=spec.model.use_chat_template,
    )


def provenance(spec: JobSpec) -> Provenance:
    """The provenance of a run of `spec`, taken before it trains (the data as it starts)."""
    return Provenance(
        numtune_version=numtune_version(),
        git_commit=git_commit(),
        spec=spec,
        data_sha256={path: sha256_of(table_location(path)) for path in data_files(spec)},
        decoding=decoding_of(spec),
    )
