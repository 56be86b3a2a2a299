"""The `service/` rows of docs/reference/layout.md, written from the tree itself.

One row for the glue directly under `service/`, then one per package: the package's docstring
(what the feature is, its layers inside), then each of its modules with the first sentence of
its own docstring. So a moved, added or renamed module changes the page with it:
`python -m docs.tooling.layout --write` rewrites the rows, and tests/checks compares them.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "layout.md"
ROW_START = "| `service/"


def docstring(path: Path) -> str:
    text = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(text.split())


def first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence (not one inside a name like `x.py`)."""
    match = re.search(r"\.(\s|$)", text)
    return (text[: match.start()] if match else text).rstrip(":")


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def package_row(package: Path) -> str:
    modules = sorted(p for p in package.glob("*.py") if p.name != "__init__.py")
    parts = [f"`{p.name}` ({first_sentence(docstring(p))})" for p in modules]
    what = docstring(package / "__init__.py")
    listing = "; ".join(parts)
    text = f"{what} Modules: {listing}." if parts else what
    return f"| `{package.relative_to(ROOT)}/` | {cell(text)} |"


def rows() -> list[str]:
    service = ROOT / "service"
    glue = sorted(p for p in service.glob("*.py") if p.name != "__init__.py")
    names = ", ".join(f"`{p.relative_to(ROOT)}`" for p in glue)
    what = "; ".join(f"`{p.name}`: {first_sentence(docstring(p))}" for p in glue)
    out = [f"| {names} | the glue directly under `service/`: {cell(what)} |"]
    packages = sorted(p for p in service.iterdir() if (p / "__init__.py").exists())
    return out + [package_row(p) for p in packages]


def rendered(page: str) -> str:
    """The page with its `service/` rows (one contiguous block of the table) rewritten."""
    lines = page.split("\n")
    at = [i for i, line in enumerate(lines) if line.startswith(ROW_START)]
    if not at or at != list(range(at[0], at[-1] + 1)):
        raise ValueError(f"{PAGE}: the service/ rows must be one contiguous block of the table")
    return "\n".join(lines[: at[0]] + rows() + lines[at[-1] + 1 :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the page in place")
    args = parser.parse_args()
    page = PAGE.read_text()
    new = rendered(page)
    if args.write:
        PAGE.write_text(new)
    print("up to date" if new == page else ("rewritten" if args.write else "out of date"))


if __name__ == "__main__":
    main()
