"""Loading bench/'s scripts in tests: bench/ is not a package, its scripts import each other
by plain name with bench/ as their import root."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"


def bench_module(name: str) -> ModuleType:
    """Import bench's `name` (dotted for its packages, e.g. docsgen.results) with bench/ as
    the import root, as its scripts see each other."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def load(name: str) -> ModuleType:
    """A fresh copy of bench/<name>.py, registered as `bench_<name>` (a script's own
    module-level state starts anew for each test that loads it)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
