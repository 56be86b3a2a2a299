"""`numtune models calibrate REF` (POST /v1/calibrate on the serving endpoint, a write token)
and the calibration column of `numtune models show`; service/cli/models.py registers the
command in the `models` group."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from jobs.calibration.record import WIDE_NOTE, WIDE_RELATIVE_WIDTH
from jobs.storage.paths import numtune_home
from service.cli.client import Client, resolve_serve_url, resolve_token
from service.cli.rest import console, fail, friendly, show


def read_examples(path: Path) -> list[dict[str, str]]:
    """JSONL rows {"prompt": ..., "answer": ...}; a bad row is a usage error naming its line."""
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        fail(f"--file: cannot read {path}: {error}", 2)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            fail(f"--file: {path}:{number} is not JSON: {error}", 2)
        if not isinstance(row, dict) or not {"prompt", "answer"} <= row.keys():
            fail(f"--file: {path}:{number} needs the keys prompt and answer", 2)
        rows.append({"prompt": str(row["prompt"]), "answer": str(row["answer"])})
    if not rows:
        fail(f"--file: {path} holds no rows", 2)
    return rows


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def summary(record: dict[str, Any] | None) -> str:
    """One line for `models show`: the 90 % interval's coverage as sampled → calibrated (out
    of sample, with its Wilson 95 % interval), its median relative width, and `WIDE`."""
    if not record:
        return "not calibrated"
    level = next((r for r in record.get("levels", []) if r.get("level") == 0.9), None)
    text = f"n={record.get('n')} K={record.get('samples')} best={record.get('best')}"
    if not level:
        return text
    measured = level.get("calibrated") or {}
    served = measured or level["sampled"]
    text += f" 90%: {_pct(level['sampled']['coverage'])}→{_pct(measured.get('coverage'))}"
    if measured:
        text += f" [{_pct(measured['coverage_low'])}, {_pct(measured['coverage_high'])}]"
    elif level.get("nested_parameter") is not None:
        text += " (not measured out of sample: recalibrate)"
    rel = served.get("relative_width_median")
    if rel is not None:
        text += f" rel.width {rel:.2g}"
    if served.get("wide"):
        text += f" WIDE ({WIDE_NOTE})"
    return text


def _interval_cells(report: dict[str, Any] | None) -> list[str]:
    """coverage [Wilson 95 %], mean width, median relative width, Winkler, wide."""
    if report is None:
        return ["-"] * 5
    cov = f"{report['coverage']:.3f} [{report['coverage_low']:.2f}, {report['coverage_high']:.2f}]"
    cells = [report.get("width_mean"), report.get("relative_width_median"),
             report.get("winkler_mean")]  # fmt: skip
    return [cov, *("-" if c is None else f"{c:.3g}" for c in cells),
            "yes" if report.get("wide") else "no"]  # fmt: skip


def show_calibration(ref: str, record: dict[str, Any]) -> None:
    console.print(f"[bold]{ref}[/bold]: {record['n']} questions ({record['source']}), "
                  f"K={record['samples']}, coverage measured {record.get('method')}")  # fmt: skip
    columns = ("coverage [95 %]", "mean width", "median rel. width", "Winkler", "wide")
    levels = Table("nominal", "interval", *columns, "t (sample mass, margin)")
    for r in record["levels"]:
        t = r["nested_parameter"]
        fitted = "-" if t is None else f"{t:.4g} ({r['sample_mass']:.3g}, {r['margin']:.3g})"
        levels.add_row(f"{r['level']:.0%}", "sampled", *_interval_cells(r["sampled"]), "")
        levels.add_row("", "calibrated", *_interval_cells(r["calibrated"]), fitted)
    show(levels)
    console.print(f"{WIDE_NOTE} (flagged when the median width > {WIDE_RELATIVE_WIDTH:g} × "
                  "max(|answer|, 1))")  # fmt: skip
    estimators = Table("estimate", "MAE", "median rel. error", "exact match", "answered")
    for name, e in record["estimators"].items():
        mark = " (best)" if name == record["best"] else ""
        estimators.add_row(
            name + mark, "-" if e["mae"] is None else f"{e['mae']:.4g}",
            "-" if e["median_rel_error"] is None else f"{e['median_rel_error']:.4g}",
            f"{e['exact_match']:.3f}", f"{e['answered']:.3f}",
        )  # fmt: skip
    show(estimators)


@friendly
def calibrate(
    ref: Annotated[str, typer.Argument(help="name@alias, name:version or name")],
    file: Annotated[
        Path | None, typer.Option("--file", help="JSONL prompt/answer rows (else held-out)")
    ] = None,
    questions: Annotated[int, typer.Option(help="at most this many questions")] = 200,
    samples: Annotated[int, typer.Option(help="K sampled completions per question")] = 16,
) -> None:
    """Measure a version's interval coverage and point estimates on held-out questions and
    store the conformal calibration that serving then applies (needs a write token)."""
    body: dict[str, Any] = {"model": ref, "questions": questions, "samples": samples}
    if file is not None:
        body["examples"] = read_examples(file)
    home = numtune_home()
    client = Client(resolve_serve_url(home), resolve_token(home), timeout_s=3600)
    with console.status(f"calibrating {ref} on up to {questions} questions"):
        reply: dict[str, Any] = client.json("POST", "/v1/calibrate", body=body)
    show_calibration(reply["ref"], reply["calibration"])
