"""Suite-wide settings: every test gets its own NUMTUNE_HOME, never the user's."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Fewer threads than cores: Ray workers and the test process share 2 cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# At Ray's default health-check interval (2 s) each ray.train.report blocks ~2 s.
os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")

# Model and data caches are shared by the whole session (converting SmolLM2 once is
# enough); storage and databases are per test.
_SESSION_HOME = Path(os.environ.get("NUMTUNE_TEST_CACHE", Path.home() / ".cache" / "numtune-test"))
os.environ.setdefault("NUMTUNE_HOME", str(_SESSION_HOME))


@pytest.fixture
def storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "storage"
    root.mkdir()
    monkeypatch.setenv("NUMTUNE_STORAGE", str(root))
    yield root
