"""MkDocs hook: adds the generated pages and bench/results' plots to the site's files."""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

# MkDocs loads this file by its path, from the checkout's root (`python -m mkdocs`, or
# PYTHONPATH naming it): its package is imported from there, as `docs.tooling`.
from docs.tooling import rest, results


def on_files(files: Files, config: Any) -> Files:
    generated = {**results.pages(), "reference/rest.md": rest.page()}
    for uri, content in generated.items():
        files.append(File.generated(config, uri, content=content))
    for png in sorted(results.RESULTS.glob("*.png")):
        files.append(File.generated(config, f"results/{png.name}", abs_src_path=str(png)))
    return files
