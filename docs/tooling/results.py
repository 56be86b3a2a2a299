"""The measured-results pages, rendered from `bench/results/*.json` at build time.

One page per benchmark (the file name before its first `-`: `api_load-2w-postgresql.json`
belongs to `api_load`). A benchmark whose script also writes Markdown from its JSON
(`accuracy-small.md`, `calibration-k16.md`) shows that; every other JSON is laid out as
tables of its fields. Each page ends with the plots of the same name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench import readme_results

ROOT = Path(__file__).resolve().parents[2]  # the checkout: docs/tooling/ is two below it
RESULTS = ROOT / "bench" / "results"
MAX_LIST = 12  # a list of numbers longer than this is cut, saying how long it was


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        shown = ", ".join(_value(v) for v in value[:MAX_LIST])
        return shown + (f", … ({len(value)} values)" if len(value) > MAX_LIST else "")
    if isinstance(value, dict | list):
        return "`" + json.dumps(value, separators=(",", ":"))[:80] + "`"
    return " ".join(str(value).split()).replace("|", "\\|")


def _walk(data: Any, prefix: str, fields: list[tuple[str, str]], tables: list[Any]) -> None:
    """Scalars (and short lists) into `fields` by dotted path; lists of records into `tables`."""
    if isinstance(data, dict):
        for key, value in data.items():
            _walk(value, f"{prefix}.{key}" if prefix else str(key), fields, tables)
    elif isinstance(data, list) and data and all(isinstance(v, dict) for v in data):
        tables.append((prefix, data))
    else:
        fields.append((prefix, _value(data)))


def json_markdown(data: Any) -> list[str]:
    fields: list[tuple[str, str]] = []
    tables: list[tuple[str, list[dict[str, Any]]]] = []
    _walk(data, "", fields, tables)
    lines = ["| field | value |", "|---|---|", *(f"| `{k}` | {v} |" for k, v in fields), ""]
    for name, records in tables:
        columns = list(dict.fromkeys(k for r in records for k in r))
        lines += [
            f"`{name}`:",
            "",
            "| " + " | ".join(columns) + " |",
            "|" + "---|" * len(columns),
            *("| " + " | ".join(_value(r.get(c, "")) for c in columns) + " |" for r in records),
            "",
        ]
    return lines


def _demote(markdown: str) -> list[str]:
    """A generated report's own headings, one level under the file's heading."""
    return re.sub(r"^(#+) ", r"\1## ", markdown, flags=re.M).splitlines()


def readme_section(study: Path) -> list[str]:
    """The README's "Do numeric losses help?" section, as bench/readme_results.py renders it."""
    section = readme_results.render(json.loads(study.read_text()))
    return ["## In short", "", *section.split("\n", 1)[1].splitlines(), ""]


def families(results: Path = RESULTS) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for path in sorted(results.glob("*.json")):
        out.setdefault(path.stem.split("-", 1)[0], []).append(path)
    return out


def page(name: str, files: list[Path], results: Path = RESULTS) -> str:
    script = ROOT / "bench" / f"{name}.py"
    by = f", which `bench/{name}.py` writes" if script.exists() else ""
    lines = [
        f"# Results: `{name}`",
        "",
        f"Generated at build time from `bench/results/{name}*.json`{by}; nothing here is "
        "typed by hand.",
        "",
    ]
    if name == "accuracy":
        lines += readme_section(files[0])
    for path in files:
        lines += [f"## `{path.name}`", ""]
        report = path.with_suffix(".md")
        lines += (
            _demote(report.read_text())
            if report.exists()
            else json_markdown(json.loads(path.read_text()))
        )
        lines.append("")
    for png in sorted(results.glob(f"{name}*.png")):
        if png.stem.split("-", 1)[0] == name:
            lines += [f"![{png.stem}]({png.name})", ""]
    return "\n".join(lines)


def pages(results: Path = RESULTS) -> dict[str, str]:
    """{"results/<benchmark>.md": Markdown} for every benchmark, plus the index."""
    found = families(results)
    out = {f"results/{name}.md": page(name, files, results) for name, files in found.items()}
    index = [
        "# Measured results",
        "",
        "Every figure on these pages is rendered at build time from the JSON the benchmarks "
        "in `bench/` commit to `bench/results/`. Machine, load and commit are in each file.",
        "",
        "| benchmark | files |",
        "|---|---|",
        *(
            f"| [{name}]({name}.md) | " + ", ".join(f"`{p.name}`" for p in files) + " |"
            for name, files in found.items()
        ),
    ]
    out["results/index.md"] = "\n".join(index) + "\n"
    return out
