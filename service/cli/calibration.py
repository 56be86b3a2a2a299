"""`numtune models calibrate REF` (POST /v1/calibrate on the serving endpoint, a write token)
and the calibration column of `numtune models show`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from jobs.paths import numtune_home
from service.cli.client import Client, resolve_serve_url, resolve_token
from service.cli.models import models_app
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


def summary(metrics: dict[str, Any]) -> str:
    """One line for `models show`: the 90 % interval's coverage before/after, best estimate."""
    record = metrics.get("calibration")
    if not record:
        return "not calibrated"
    level = next((r for r in record.get("levels", []) if r.get("level") == 0.9), None)
    text = f"n={record.get('n')} K={record.get('samples')} best={record.get('best')}"
    if level:
        after = level.get("calibrated_coverage")
        text += f" 90%: {level['coverage']:.2f}→{'-' if after is None else f'{after:.2f}'}"
    return text


def show_calibration(ref: str, record: dict[str, Any]) -> None:
    console.print(f"[bold]{ref}[/bold]: {record['n']} questions ({record['source']}), "
                  f"K={record['samples']}")  # fmt: skip
    levels = Table(
        "nominal", "coverage", "width", "calibrated mass", "calibrated coverage", "width"
    )
    for r in record["levels"]:
        q, cov, wid = r["calibrated_mass"], r["calibrated_coverage"], r["calibrated_width"]
        levels.add_row(
            f"{r['level']:.0%}", f"{r['coverage']:.3f}", f"{r['width']:.3g}",
            "-" if q is None else f"{q:.4g}", "-" if cov is None else f"{cov:.3f}",
            "-" if wid is None else f"{wid:.3g}",
        )  # fmt: skip
    show(levels)
    estimators = Table("estimate", "MAE", "median rel. error", "exact match", "answered")
    for name, e in record["estimators"].items():
        mark = " (best)" if name == record["best"] else ""
        estimators.add_row(
            name + mark, "-" if e["mae"] is None else f"{e['mae']:.4g}",
            "-" if e["median_rel_error"] is None else f"{e['median_rel_error']:.4g}",
            f"{e['exact_match']:.3f}", f"{e['answered']:.3f}",
        )  # fmt: skip
    show(estimators)


@models_app.command("calibrate")
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
