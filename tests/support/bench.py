"""bench/'s scripts in tests: `bench` is a package of the checkout, its scripts modules of it."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"


def load(name: str) -> ModuleType:
    """The module bench.<name> (a script of bench/), by the name a test names it."""
    return importlib.import_module(f"bench.{name}")
