"""Suite-wide settings: every test gets its own NUMTUNE_HOME, never the user's."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


# One `numtune up` (a Ray head, the API, a Serve replica: ~40 s to start on 2 cores) serves
# every test that only submits its own jobs and reads them back: the browser tests and most
# e2e tests. Tests that stop, kill or restart the stack (`numtune_up`), or start their own,
# keep theirs. The users run one after another, and the stack stops after the last of them,
# so the rest of the suite never shares the cores with it.
SHARED = "shared_numtune"
_shared = contextlib.ExitStack()
_stack: list[Any] = []  # the running shared stack, if any


def _uses_shared(item: pytest.Item | None) -> bool:
    return item is not None and SHARED in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The shared stack's users together, where the first of them was."""
    users = [item for item in items if _uses_shared(item)]
    if users:
        first, chosen = items.index(users[0]), set(users)
        others = [item for item in items if item not in chosen]
        items[:] = others[:first] + users + others[first:]


@pytest.fixture(scope="session")
def shared_numtune(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The suite's shared `numtune up --dev`, started by its first user (session-scoped so
    that module fixtures may build on it; it is stopped after its last user, below)."""
    from tests.e2e.conftest import running_numtune

    if not _stack:
        home = tmp_path_factory.mktemp("shared") / "home"
        _stack.append(_shared.enter_context(running_numtune(home)))
    return _stack[0]


@pytest.fixture(scope="session")
def shared_study(shared_numtune: Any) -> Any:
    """Issue 29's study, posted once on the shared stack: the browser test follows it live,
    the e2e test checks its result."""
    from tests.e2e.studies import post_study

    return post_study(shared_numtune)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if _stack and _uses_shared(item) and not _uses_shared(nextitem):
        _stack.clear()
        _shared.close()  # `numtune down`, and the backstop kill of anything left


def pytest_sessionfinish() -> None:
    _stack.clear()
    _shared.close()
