"""Where numtune keeps local state: NUMTUNE_HOME (default ~/.numtune), its caches and storage."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

log = logging.getLogger(__name__)


def numtune_home() -> Path:
    return Path(os.environ.get("NUMTUNE_HOME") or Path.home() / ".numtune").expanduser()


def cache_dir(*parts: str) -> Path:
    """A folder under <home>/cache, created on first use (models, tokenizers, datasets)."""
    path = numtune_home().joinpath("cache", *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def storage_root() -> str:
    """NUMTUNE_STORAGE (a local path or any pyarrow filesystem URI), else <home>/storage."""
    return os.environ.get("NUMTUNE_STORAGE") or str(numtune_home() / "storage")


def build_once(target: Path, build: Callable[[Path], None], *, marker: str) -> Path:
    """The folder `target`, made by `build(tmp)` once per machine, safe under concurrency.

    Two Ray workers often start at once: a file lock lets one build while the other waits.
    The build writes into a private temporary folder that is renamed into place when
    complete, so `target` either does not exist or is whole; `marker` is a file every
    complete build contains. A crashed build leaves only a `.partial` folder, removed by
    the next build.
    """
    if (target / marker).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.parent / f".{target.name}.lock")):
        if (target / marker).exists():  # another process built it while we waited
            return target
        prefix = f".{target.name}.partial-"
        for stale in target.parent.glob(prefix + "*"):
            shutil.rmtree(stale)  # only the lock holder writes: anything left is a crash
        if target.exists():
            # Not ours and not whole (no marker): never merge into it.
            raise FileExistsError(f"{target} exists but holds no {marker}; remove it to rebuild")
        tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is readable like any folder
        try:
            build(tmp)
            if not (tmp / marker).exists():
                raise RuntimeError(f"building {target.name} wrote no {marker}")
            tmp.rename(target)  # atomic on one filesystem
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
    log.info("built %s", target)
    return target
