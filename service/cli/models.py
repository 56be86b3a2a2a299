"""`numtune models ...` (the registry, through the control plane) and `numtune predict`
(a numeric query to the serving endpoint)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from jobs.storage.paths import numtune_home
from service.cli.calibration import calibrate, summary
from service.cli.client import Client, resolve_serve_url, resolve_token
from service.cli.rest import connect, console, friendly, show

models_app = typer.Typer(help="The model registry: versions, aliases, registration.")
ModelName = Annotated[str, typer.Argument(help="registry model name")]


def _fmt(value: Any, digits: int = 6) -> str:
    return (
        "-" if value is None else f"{value:.{digits}g}" if isinstance(value, float) else str(value)
    )


@models_app.command("list")
@friendly
def list_models() -> None:
    """Every model you can see, its newest version and its aliases."""
    table = Table("model", "owner", "versions", "newest", "aliases")
    for m in connect().json("GET", "/v1/models"):
        newest = m["versions"][-1] if m["versions"] else None
        aliases = ", ".join(f"{a}→{v}" for a, v in sorted(m["aliases"].items()))
        table.add_row(
            m["name"],
            m["owner"],
            str(len(m["versions"])),
            newest["ref"] if newest else "-",
            aliases,
        )
    show(table)


@models_app.command("show")
@friendly
def show_model(name: ModelName) -> None:
    """A model's versions with their lineage (job, loss, dataset) and eval metrics."""
    model = connect().json("GET", f"/v1/models/{name}")
    table = Table(
        "version", "aliases", "job", "loss", "dataset", "eval metrics", "calibration", "created"
    )
    for v in model["versions"]:
        loss = v["spec"].get("loss", {})
        metrics = " ".join(
            f"{k}={_fmt(x, 4)}" for k, x in sorted(v["metrics"].items()) if k.startswith("eval_")
        )
        table.add_row(
            str(v["version"]),
            ", ".join(v["aliases"]),
            v["job_id"],
            f"{loss.get('name')} λ={loss.get('weight')}",
            f"{v['dataset'].get('task')} {','.join(v['dataset'].get('modules') or [])}",
            metrics,
            summary(v.get("calibration")),
            v["created_at"][:19],
        )
    show(table)


@models_app.command("register")
@friendly
def register(
    name: ModelName,
    job_id: Annotated[str, typer.Option("--job", help="a succeeded job of yours")],
    checkpoint: Annotated[
        str | None, typer.Option(help="inside the job's run folder; default its best")
    ] = None,
) -> None:
    """Register a job's checkpoint as the next version of NAME."""
    body = {"job_id": job_id, "checkpoint": checkpoint}
    version = connect().json("POST", f"/v1/models/{name}/versions", body=body)
    typer.echo(f"registered {version['ref']} from {version['job_id']}")


@models_app.command("alias")
@friendly
def alias(name: ModelName, alias: str, version: int) -> None:
    """Point ALIAS (e.g. production) of NAME at VERSION."""
    connect().json("PUT", f"/v1/models/{name}/aliases/{alias}", body={"version": version})
    typer.echo(f"{name}@{alias} -> {name}:{version}")


@models_app.command("delete")
@friendly
def delete_version(name: ModelName, version: int) -> None:
    """Delete a version that no alias points to."""
    connect().request("DELETE", f"/v1/models/{name}/versions/{version}")
    typer.echo(f"deleted {name}:{version}")


def ask(
    model: str,
    prompts: list[str],
    *,
    decoding: str = "greedy",
    samples: int = 16,
    max_new_tokens: int = 16,
    interval: float = 0.9,
) -> dict[str, Any]:
    """POST /v1/predict on the serving endpoint; the reply as JSON."""
    home = numtune_home()
    client = Client(resolve_serve_url(home), resolve_token(home), timeout_s=600)
    body = {
        "model": model,
        "prompts": prompts,
        "decoding": decoding,
        "samples": samples,
        "max_new_tokens": max_new_tokens,
        "interval_mass": interval,
    }
    reply: dict[str, Any] = client.json("POST", "/v1/predict", body=body)
    return reply


def show_predictions(reply: dict[str, Any], prompts: list[str], interval: float) -> None:
    table = Table("prompt", "answer", "value", "expected ± std", f"{interval:.0%} interval")
    for prompt, p in zip(prompts, reply["predictions"], strict=True):
        spread = f"{_fmt(p.get('expected_value'))} ± {_fmt(p.get('std'), 3)}"
        lo_hi = p.get("interval")
        table.add_row(
            prompt,
            p["text"].strip(),
            _fmt(p.get("value")) if p.get("value") is not None else f"- ({p.get('value_reason')})",
            spread,
            f"[{_fmt(lo_hi[0])}, {_fmt(lo_hi[1])}]" if lo_hi else "-",
        )
    console.print(f"[bold]{reply.get('model')}[/bold] (version {reply.get('version', '?')})")
    show(table)
    calibration = reply.get("calibration") or {}
    if calibration.get("wide"):
        console.print(f"[yellow]{calibration.get('wide_note')}[/yellow] (median width "
                      f"{calibration.get('relative_width_median'):.2g} × the answer)")  # fmt: skip


@friendly
def predict(
    prompts: Annotated[list[str], typer.Argument(help="one or more questions")],
    model: Annotated[str, typer.Option(help="name@alias, name:version or name")],
    decoding: Annotated[str, typer.Option(help="greedy | expected | median")] = "greedy",
    samples: Annotated[int, typer.Option(help="K sampled completions for the spread")] = 16,
    max_new_tokens: Annotated[int, typer.Option()] = 16,
    interval: Annotated[float, typer.Option(help="mass of the interval")] = 0.9,
) -> None:
    """Ask the served model numeric questions: its answer, the parsed number, and its own
    expected value, spread and interval from K samples."""
    reply = ask(
        model,
        prompts,
        decoding=decoding,
        samples=samples,
        max_new_tokens=max_new_tokens,
        interval=interval,
    )
    show_predictions(reply, prompts, interval)


models_app.command("calibrate")(calibrate)  # after the others: last in `numtune models --help`
