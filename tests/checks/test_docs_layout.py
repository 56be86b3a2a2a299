"""The documentation's layout table (docs/reference/layout.md) names every module of `jobs/`
and `service/`, and nothing else.

A module counts as named when its own path or one of its folders (`jobs/losses/`) is in the
table; every path the table names must exist.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def layout_paths() -> set[str]:
    text = (ROOT / "docs" / "reference" / "layout.md").read_text()
    table = text.split("# Repository layout\n", 1)[1].strip().split("\n\n", 1)[0]
    assert table.startswith("| path | what |"), "the layout table must follow the heading"
    return set(re.findall(r"`((?:jobs|service)/[\w/.]*)`", table))


def test_every_module_is_in_the_layout_table() -> None:
    named = layout_paths()
    missing = []
    modules = sorted((ROOT / "jobs").rglob("*.py")) + sorted((ROOT / "service").rglob("*.py"))
    assert len(modules) >= 100, ROOT  # none found would check nothing
    for module in modules:
        rel = module.relative_to(ROOT)
        if rel.name == "__init__.py" or "migrations" in rel.parts:
            continue
        folders = {"/".join(rel.parts[:i]) + "/" for i in range(2, len(rel.parts))}
        if str(rel) not in named and not folders & named:
            missing.append(str(rel))
    assert not missing, f"modules the layout table does not name: {missing}"


def test_every_path_in_the_layout_table_exists() -> None:
    named = sorted(layout_paths())
    assert len(named) >= 20  # a table naming no path would check nothing
    gone = [p for p in named if not (ROOT / p).exists()]
    assert not gone, f"the layout table names paths that do not exist: {gone}"
