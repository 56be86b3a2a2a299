"""The accuracy study's outputs: JSON, Markdown and plots, rendered again from a kept result
with no training (the tables and plots of the code at hand, the same figures):

    python -m bench.accuracy_output bench/results/accuracy-small.json --out bench/results
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.accuracy_plots import plot_all
from bench.accuracy_report import markdown, summarise
from jobs.records.provenance import git_commit


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="render a kept accuracy result again")
    p.add_argument("saved", type=Path, help="accuracy-<scale>.json")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = p.parse_args(argv)
    return render(args.saved, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
