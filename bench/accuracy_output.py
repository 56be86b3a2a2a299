"""The accuracy study's outputs: results merged across invocations, then JSON, Markdown and
plots written (or rewritten from a saved JSON with no training)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accuracy_plots import plot_all
from accuracy_report import markdown, summarise
from rich.console import Console

from jobs.records.provenance import git_commit


def merged(previous: Path, fresh: dict[str, Any]) -> dict[str, Any]:
    """Earlier parts' runs and sweeps kept, this invocation's replacing the same keys."""
    old = json.loads(previous.read_text()) if previous.exists() else {}
    key = lambda r: (r["model"], r["task"], r["loss"], r["seed"])  # noqa: E731
    runs = {key(r): r for r in old.get("runs", []) if "model" in r}
    runs.update({key(r): r for r in fresh["runs"]})
    parts = sorted({*old.get("parts", []), *fresh["parts"]})
    return {
        **fresh,
        "parts": parts,
        "invocations": [*old.get("invocations", []), *fresh["invocations"]],
        "tuned": {**old.get("tuned", {}), **fresh["tuned"]},
        "runs": list(runs.values()),
    }


def write_outputs(result: dict[str, Any], out: Path, console: Console) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"accuracy-{result['scale']}"
    # Strict JSON: an undefined statistic is null, never NaN.
    stem.with_suffix(".json").write_text(json.dumps(nan_to_none(result), indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(result))
    written = plot_all(result, stem)
    console.print(markdown(result))
    console.print(f"wrote {stem}.json, .md and {', '.join(p.name for p in written)}")


def nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [nan_to_none(v) for v in value]
    return value


def render(saved: Path, out: Path) -> int:
    """Tables and plots again from a saved result's runs (no training): same figures."""
    result = json.loads(saved.read_text())
    result["summary"] = summarise(result["runs"], result["scale"])
    result["rendered_by"] = git_commit(Path(__file__).resolve().parents[1])
    write_outputs(result, out, Console())
    return 0
