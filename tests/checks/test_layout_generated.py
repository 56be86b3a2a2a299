"""docs/reference/layout.md's `service/` rows are what docs/tooling/layout.py writes from the tree:
move, add or rename a module and this fails until `python docs/tooling/layout.py --write`."""

from __future__ import annotations

import pytest

from docs.tooling import layout


def test_the_service_rows_are_generated_from_the_tree() -> None:
    page = layout.PAGE.read_text()
    assert layout.rendered(page) == page, "run: python docs/tooling/layout.py --write"


def test_every_service_package_has_a_row_naming_its_modules() -> None:
    rows = layout.rows()
    packages = [p for p in (layout.ROOT / "service").iterdir() if (p / "__init__.py").exists()]
    assert len(rows) == len(packages) + 1 and len(packages) >= 10
    jobs_row = next(row for row in rows if row.startswith("| `service/jobs/`"))
    assert "`reconciler.py` (" in jobs_row and "`submit.py` (" in jobs_row


def test_a_split_block_of_service_rows_is_refused() -> None:
    page = "| path | what |\n| `service/a/` | x |\n| `jobs/` | y |\n| `service/b/` | z |\n"
    with pytest.raises(ValueError, match="contiguous"):
        layout.rendered(page)
