"""`numtune study run|plan|show|list|kept|cancel`: studies (/v1/studies) from the command
line."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from service.cli.client import Client, ClientError
from service.cli.rest import FollowOpt, KeyOpt, SpecArg, connect, console, friendly, read_spec, show

study_app = typer.Typer(help="Studies: does a numeric loss beat ce on your data, and how sure?")
ENDED = ("succeeded", "failed", "cancelled")
POLL_S = 2.0
JsonOpt = Annotated[bool, typer.Option("--json", help="the study's record as JSON (REST's)")]
CurvesOpt = Annotated[
    Path | None, typer.Option("--curves", help="also save every arm's learning curves (SVG)")
]
KeptOpt = Annotated[
    Path | None,
    typer.Option("--kept", help="resume it from this kept work (`numtune study kept` of "
                 "the service it ran on): what finished there is not trained again"),
]  # fmt: skip


def _num(value: Any, fmt: str = "{:+.3f}") -> str:
    return fmt.format(value) if isinstance(value, int | float) else "–"


def render(study: dict[str, Any]) -> None:
    """The study's state; once compared, a table of the arms and their verdicts."""
    typer.echo(f"study {study['id']} {study['status']} ({study['name']}): "
               f"{study['ended']}/{len(study['runs'])} runs ended")  # fmt: skip
    if study.get("detail"):
        typer.echo(study["detail"])
    result = study.get("result") or {}
    comparison = result.get("comparison")
    if not comparison:
        return
    metric = comparison["primary"]
    primaries = comparison.get("primaries") or [metric]
    # One row per arm and primary metric (Holm runs over all of them).
    table = Table("arm", *(["metric"] if len(primaries) > 1 else []),
                  f"mean {metric}" if len(primaries) == 1 else "mean", "diff vs ce", "95% CI",
                  "p", "p_boot", "p_Holm", "equivalent", "wins")  # fmt: skip
    for arm in comparison["arms"]:
        tests = {t["metric"]: t for t in arm.get("primary_tests") or []}
        tests = tests or ({metric: arm["vs_ce"]} if arm.get("vs_ce") else {})
        for name in primaries:
            test = tests.get(name) or {}
            ci = test.get("ci") or {}
            wins = f"{test['wins']}/{test['n']}" if test else "–"
            table.add_row(
                arm["arm"], *([name] if len(primaries) > 1 else []),
                _num(arm["mean"].get(name), "{:.3f}"), _num(test.get("diff")),
                f"[{_num(ci.get('low'))}, {_num(ci.get('high'))}]" if ci else "–",
                _num(test.get("p"), "{:.3g}"), _num(test.get("p_boot"), "{:.3g}"),
                _num(test.get("p_holm"), "{:.3g}"), str(test.get("equivalent", "–")), wins,
            )  # fmt: skip
    show(table)
    for arm in comparison["arms"]:
        typer.echo(f"- {arm['verdict']}")
    for line in decoding_lines(result.get("decodings") or {}):
        typer.echo(line)
    for arm in comparison["arms"]:
        for line in family_lines(arm):
            typer.echo(line)
    for arm, why in (result.get("missing") or {}).items():
        typer.echo(f"- {arm}: not compared ({why})")
    for arm, shown in (result.get("intervals") or {}).items():
        typer.echo(f"- {arm}: {interval_line(shown)}")
    if result.get("reference"):
        typer.echo(reference_line(result["reference"], metric))
    power = result.get("power")
    if power:
        typer.echo(f"power: {power['statement']}")
        for arm in power["arms"]:
            if arm.get("rules_out"):
                typer.echo(f"- {arm['arm']}: its 95 % CI {arm['rules_out']}")
    promoted = result.get("promoted")
    if promoted:
        done = promoted.get("done")
        typer.echo(f"promote {promoted['alias']}: " + (
            f"{promoted['model']}:{promoted['version']} ({promoted['arm']}, {promoted['job_id']})"
            if done else f"not moved ({promoted.get('why')})"))  # fmt: skip


def decoding_lines(decodings: dict[str, Any]) -> list[str]:
    """The decoding each arm is judged by, where the study declared one (per arm, or
    best_on_validation: chosen on validation rows, with the figure it chose by)."""
    out = []
    for label, found in decodings.items():
        if not found.get("declared"):
            continue  # the base's own decoding, as in every study before per-arm decodings
        line = f"- {label}: judged by its {found['decoding']} answers"
        if found.get("metric") and found.get("validation"):
            scores = ", ".join(f"{k} {_num(v, '{:.4g}')}" for k, v in found["validation"].items())
            line += f" (best {found['metric']} on validation rows: {scores})"
        out.append(line)
    return out


def family_lines(arm: dict[str, Any]) -> list[str]:
    """An arm's secondary tests (BH's q) and exploratory ones (raw p, outside any
    correction), one line each."""
    out = []
    families = (
        ("secondary", "p_bh", "secondary (Benjamini–Hochberg)"),
        ("exploratory", "p", "exploratory (raw p, no correction)"),
    )
    for kind, key, label in families:
        tests = arm.get(kind) or []
        shown = [
            f"{t['metric']} {_num(t.get('diff'), '{:+.3g}')} "
            f"({'q' if key == 'p_bh' else 'p'} {_num(t.get(key), '{:.2g}')})"
            for t in tests
        ]
        if shown:
            out.append(f"- {arm['arm']}, {label}: " + "; ".join(shown))
    return out


def reference_line(reference: dict[str, Any], metric: str) -> str:
    """A table study's gradient-boosting row: beside the arms, never tested against ce."""
    if reference.get("error"):
        return f"reference (gradient boosting): none ({reference['error']})"
    mean = reference.get("mean") or {}
    text = (
        f"reference (gradient boosting, not an LM, outside the tests): mean {metric} "
        f"{_num(mean.get(metric), '{:.3f}')} over {len(reference.get('runs', []))} seeds"
    )
    if mean.get("interval_coverage_90") is not None:
        text += (
            f"; split-conformal 90 % interval: coverage {mean['interval_coverage_90']:.2f}, "
            f"interval score {_num(mean.get('interval_score_90'), '{:.3g}')}"
        )
    return text


def interval_line(shown: dict[str, Any]) -> str:
    """An arm's calibrated interval as its runs measured it out of sample."""
    text = (
        f"{shown['level']:.0%} interval, out of sample over {shown['runs']} runs: coverage "
        f"{_num(shown['coverage'], '{:.3f}')}, median width "
        f"{_num(shown['relative_width_median'], '{:.3g}')} × |answer|, interval score "
        f"{_num(shown['winkler_mean'], '{:.4g}')}"
    )
    return text + (" — wide: treat as a range, not an answer" if shown.get("wide") else "")


def save_curves(client: Client, study_id: str, path: Path) -> None:
    svg = client.request("GET", f"/v1/studies/{study_id}/curves").text
    try:
        path.write_text(svg)
    except OSError as error:
        raise ClientError(f"--curves {path}: {error.strerror or error}", 2) from error
    typer.echo(f"learning curves: {path}")


def follow(client: Client, study: dict[str, Any]) -> dict[str, Any]:
    """Poll until the study ends, a bar of its runs ended."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as bar:  # fmt: skip
        task = bar.add_task(study["name"], total=len(study["runs"]))
        while study["status"] not in ENDED:
            bar.update(task, completed=study["ended"], total=len(study["runs"]))
            time.sleep(POLL_S)
            study = client.json("GET", f"/v1/studies/{study['id']}")
    return study


@study_app.command("run")
@friendly
def run(
    spec: SpecArg, follow_: FollowOpt = False, idempotency_key: KeyOpt = None,
    curves: CurvesOpt = None, kept: KeptOpt = None,
) -> None:  # fmt: skip
    """Submit a study (StudySpec); with --follow, wait for its verdicts."""
    body = read_spec(spec)
    client = connect()
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    if kept is not None:
        body = {"spec": body, "kept": read_kept(kept)}
    path = "/v1/studies" if kept is None else "/v1/studies/resume"
    study = client.json("POST", path, body=body, headers=headers)
    if study.get("dry_run"):  # the spec asked for its plan only: nothing was queued
        render_plan(study)
        return
    typer.echo(
        f"study {study['id']} {study['status']} ({study['name']}): {len(study['runs'])} jobs"
    )
    if not follow_:
        return
    try:
        study = follow(client, study)
    except KeyboardInterrupt:
        raise ClientError(
            f"stopped following {study['id']}; it goes on (`numtune study cancel {study['id']}`)",
            130,
        ) from None
    render(study)
    if curves is not None:
        save_curves(client, study["id"], curves)
    if study["status"] != "succeeded":
        raise typer.Exit(1)


def render_plan(plan: dict[str, Any]) -> None:
    """A dry run's plan: the design, and what it can detect (or why there is no plan)."""
    typer.echo(
        f"plan for {plan['name']} (dry run, nothing queued): {len(plan['arms'])} arms × "
        f"{plan['seeds']} seeds = {plan['runs']} runs, {plan['questions']} questions each, "
        f"primary {plan['primary_metric']}"
    )
    power = plan.get("power")
    if not power:
        typer.echo(plan.get("detail") or "no plan")
        return
    table = Table("detectable effect (80 % power)", "test level", "target effect",
                  "seeds needed", f"questions needed ({plan['seeds']} seeds)")  # fmt: skip
    table.add_row(
        _num(power["detectable_effect"], "±{:.3g}"), _num(power["test_level"], "{:.3g}"),
        _num(power["target_effect"], "±{:.3g}"),
        str(power["seeds_needed"] or "> 1000"), str(power["questions_needed"] or "unreachable"),
    )  # fmt: skip
    show(table)
    typer.echo(power["statement"])


@study_app.command("plan")
@friendly
def plan(spec: SpecArg) -> None:
    """What a study could detect before it runs (a dry run: nothing is queued): the
    smallest effect at 80 % power with its seeds × questions, and the seeds and questions
    `power.target_effect` needs, from the spread its `power` declares or names."""
    render_plan(connect().json("POST", "/v1/studies", body={**read_spec(spec), "dry_run": True}))


@study_app.command("show")
@friendly
def show_study(study_id: str, curves: CurvesOpt = None, as_json: JsonOpt = False) -> None:
    """A study's runs so far, and once they ended its comparison and verdicts."""
    client = connect()
    study = client.json("GET", f"/v1/studies/{study_id}")
    if as_json:  # what bench/table_guide.py and other renderers read
        typer.echo(json.dumps(study, indent=2))
    else:
        render(study)
    if curves is not None:
        save_curves(client, study_id, curves)


def read_kept(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ClientError(f"--kept {path}: not a kept-work JSON file ({error})", 2) from error


@study_app.command("kept")
@friendly
def kept_work(
    study_id: str,
    out: Annotated[Path, typer.Option("--out", "-o", help="the JSON file to write")],
) -> None:
    """Save a study's succeeded sweeps and runs (not their weights), to resume it on
    another service: `numtune study run SPEC --kept FILE` there."""
    work = connect().json("GET", f"/v1/studies/{study_id}/kept")
    try:
        out.write_text(json.dumps(work) + "\n", encoding="utf-8")
    except OSError as error:
        raise ClientError(f"--out {out}: {error.strerror or error}", 2) from error
    typer.echo(f"kept {len(work['sweeps'])} sweeps and {len(work['runs'])} runs in {out}")


@study_app.command("list")
@friendly
def list_studies() -> None:
    """Your studies, newest first."""
    table = Table("id", "name", "status", "runs ended", "created")
    for s in connect().json("GET", "/v1/studies", params={"limit": 200})["items"]:
        table.add_row(
            s["id"], s["name"], s["status"], f"{s['ended']}/{len(s['runs'])}", s["created_at"]
        )
    show(table)


@study_app.command("cancel")
@friendly
def cancel(study_id: str) -> None:
    """Cancel a study and its queued and running jobs."""
    study = connect().json("POST", f"/v1/studies/{study_id}/cancel")
    typer.echo(f"study {study['id']} {study['status']}")
