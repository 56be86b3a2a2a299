"""Where numtune keeps local state: NUMTUNE_HOME (default ~/.numtune) and its storage."""

from __future__ import annotations

import os
from pathlib import Path


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
