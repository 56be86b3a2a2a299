"""The REST half of `numtune`: jobs, sweeps and tokens through the control plane's API,
and the helpers every command shares (one message and an exit code per failure)."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, NoReturn, ParamSpec, TypeVar

import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from jobs.spec import load_spec_file
from jobs.storage.paths import numtune_home
from service.cli import launcher
from service.cli.client import Client, ClientError, resolve_token, resolve_url
from service.cli.progress import follow_job, outcome_line
from service.settings import InsecureSettingsError, UnworkableSettingsError

rest_app = typer.Typer()
token_app = typer.Typer(help="Create, list and revoke API tokens (admin token needed).")
console = Console()

P = ParamSpec("P")
R = TypeVar("R")


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"numtune: {message}", err=True)
    raise typer.Exit(code)


def friendly(command: Callable[P, R]) -> Callable[P, R]:
    """Turn the failures a user can act on into one message and an exit code."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except ClientError as error:
            fail(error.message, error.code)
        except launcher.LaunchError as error:
            fail(str(error))
        except (InsecureSettingsError, UnworkableSettingsError) as error:
            fail(f"refusing to start: {error}", 2)
        except ValidationError as error:  # Settings from NUMTUNE_* variables
            fail("; ".join(setting_problem(e["loc"], e["msg"]) for e in error.errors()), 2)
        except KeyboardInterrupt:
            fail("interrupted", 130)

    return run


def setting_problem(loc: tuple[int | str, ...], message: str) -> str:
    name = "_".join(map(str, loc))
    flag = name.replace("_", "-")
    return f"invalid setting {name} (--{flag} or NUMTUNE_{name.upper()}): {message}"


def show(table: Table) -> None:
    """In a terminal, fit its width; piped, never cut a cell (scripts grep the output)."""
    (console if console.is_terminal else Console(width=250)).print(table)


def connect() -> Client:
    home = numtune_home()
    return Client(resolve_url(home), resolve_token(home))


def base(job_id: str) -> str:
    """The REST collection of an id: ids carry their kind (`job-…`, `tune-…`)."""
    return f"/v1/tunes/{job_id}" if job_id.startswith("tune-") else f"/v1/jobs/{job_id}"


def read_spec(path: Path) -> dict[str, object]:
    try:
        return load_spec_file(path)
    except FileNotFoundError:
        raise ClientError(f"spec file {path}: no such file", 2) from None
    except (OSError, ValueError, yaml.YAMLError) as error:
        reason = str(error).replace("\n", " ")
        raise ClientError(f"spec file {path}: not a YAML or JSON mapping ({reason})", 2) from None


# ---- jobs and tunes over REST -----------------------------------------------------------


def _post(collection: str, spec: Path, key: str | None, follow: bool) -> None:
    body = read_spec(spec)
    client = connect()
    headers = {"Idempotency-Key": key} if key else None
    job = client.json("POST", collection, body=body, headers=headers)
    typer.echo(f"{job['kind']} {job['id']} {job['status']} ({job['name']})")
    if follow:
        try:
            job = follow_job(client, base(job["id"]), job, console)
        except KeyboardInterrupt:
            raise ClientError(
                f"stopped following {job['id']}; it goes on (`numtune cancel {job['id']}`)", 130
            ) from None
        typer.echo(outcome_line(job))
        if job["status"] != "succeeded":
            raise typer.Exit(1)


SpecArg = Annotated[Path, typer.Argument(help="spec file (YAML or JSON)")]
FollowOpt = Annotated[bool, typer.Option("--follow", "-f", help="show progress until it ends")]
KeyOpt = Annotated[str | None, typer.Option(help="retrying with the same key never submits twice")]


@rest_app.command()
@friendly
def submit(spec: SpecArg, follow: FollowOpt = False, idempotency_key: KeyOpt = None) -> None:
    """Submit a training job (JobSpec)."""
    _post("/v1/jobs", spec, idempotency_key, follow)


@rest_app.command()
@friendly
def tune(spec: SpecArg, follow: FollowOpt = False, idempotency_key: KeyOpt = None) -> None:
    """Submit a Ray Tune sweep (TuneSpec)."""
    _post("/v1/tunes", spec, idempotency_key, follow)


STATUS_FIELDS = (
    *("id", "kind", "name", "owner", "status", "reason", "detail", "ray_status"),
    *("queue_position", "waiting_for"),
    *("created_at", "started_at", "finished_at", "metrics_count", "best_checkpoint"),
)


@rest_app.command()
@friendly
def status(
    job_id: str, as_json: Annotated[bool, typer.Option("--json", help="the raw record")] = False
) -> None:
    """One job or sweep: status, reason, times, final metrics."""
    job = connect().json("GET", base(job_id))
    if as_json:
        typer.echo(json.dumps(job, indent=2))
        return
    for key in STATUS_FIELDS:
        if job.get(key) not in (None, ""):
            typer.echo(f"{key + ':':16}{job[key]}")
    for name, value in (job.get("final_metrics") or {}).items():
        typer.echo(f"{'metric ' + name + ':':16}{value}")


STATUS_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "cancelled": "yellow",
    "running": "cyan",
    "paused": "magenta",
}


@rest_app.command("list")
@friendly
def list_jobs(
    status: Annotated[str | None, typer.Option(help="queued, running, succeeded, ...")] = None,
    name: Annotated[str | None, typer.Option(help="only jobs with this name")] = None,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 50,
    tunes: Annotated[bool, typer.Option("--tunes", help="list sweeps, not jobs")] = False,
) -> None:
    """List jobs (or sweeps with --tunes), newest first."""
    page = connect().json(
        "GET",
        "/v1/tunes" if tunes else "/v1/jobs",
        params={"status": status, "name": name, "limit": limit},
    )
    table = Table("ID", "NAME", "STATUS", "REASON", "METRICS", "CREATED (UTC)", "OWNER")
    table.columns[0].no_wrap = True
    for job in page["items"]:
        style = STATUS_STYLE.get(job["status"], "")
        reason = job.get("reason") or ""
        if job["status"] == "queued" and job.get("waiting_for"):
            reason = f"#{job.get('queue_position')} waiting for {job['waiting_for']}"
        table.add_row(job["id"], job["name"], f"[{style}]{job['status']}[/]" if style else
                      job["status"], reason, str(job["metrics_count"]),
                      job["created_at"][:19].replace("T", " "), job["owner"])  # fmt: skip
    show(table)
    if page.get("next_cursor"):
        typer.echo(f"(more than {limit}; raise --limit or filter)")


@rest_app.command()
@friendly
def logs(job_id: str, follow: FollowOpt = False) -> None:
    """The job's log as copied into the service; -f streams it until the job ends."""
    client = connect()
    if not follow:
        sys.stdout.write(client.request("GET", f"{base(job_id)}/logs").text)
        return
    for event, data in client.events(f"{base(job_id)}/logs", {"follow": "true"}):
        if event == "end":
            typer.echo(f"-- {job_id} {json.loads(data).get('status')}", err=True)
            return
        if event == "queued":
            queued = json.loads(data)
            where = f"#{queued['position']} in the queue, waiting for {queued['waiting_for']}"
            typer.echo(f"-- {job_id} queued: {where}", err=True)
            continue
        sys.stdout.write(data)  # a chunk is exact text: it may end mid-line
        sys.stdout.flush()


@rest_app.command()
@friendly
def cancel(job_id: str) -> None:
    """Cancel a queued, submitted or running job or sweep."""
    job = connect().json("POST", f"{base(job_id)}/cancel")
    typer.echo(f"{job['id']} {job['status']}")


@rest_app.command()
@friendly
def pause(job_id: str) -> None:
    """Pause a job or sweep: it checkpoints at its next step (a sweep: every running trial)
    and gives back its resources (a queued one is held); `numtune resume` goes on from there."""
    job = connect().json("POST", f"{base(job_id)}/pause")
    pausing = job["status"] != "paused" and job.get("pause_requested_at")
    typer.echo(f"{job['id']} {'pausing (at its next step)' if pausing else job['status']}")


@rest_app.command()
@friendly
def resume(job_id: str) -> None:
    """Resume a paused job or sweep from where it stopped (it queues again)."""
    job = connect().json("POST", f"{base(job_id)}/resume")
    typer.echo(f"{job['id']} {job['status']}")


@rest_app.command()
@friendly
def delete(job_id: str) -> None:
    """Forget a finished job: its record, metrics and logs."""
    connect().request("DELETE", base(job_id))
    typer.echo(f"{job_id} deleted")


@rest_app.command()
@friendly
def trials(tune_id: str) -> None:
    """A sweep's trials table (written when the sweep ends)."""
    rows = connect().json("GET", f"/v1/tunes/{tune_id}/trials")["items"]
    table = Table("TRIAL", "STATUS", "BEST METRIC", "CONFIG")
    table.columns[0].no_wrap = True
    for row in rows:
        config = " ".join(f"{k}={v}" for k, v in (row.get("config") or {}).items())
        best = row.get("best_metric")
        table.add_row(str(row.get("trial_id")), str(row.get("status")),
                      "" if best is None else f"{best:.4g}", config)  # fmt: skip
    show(table)


# ---- tokens -------------------------------------------------------------------------------


@token_app.command("create")
@friendly
def token_create(
    owner: Annotated[str, typer.Option(help="who the token's jobs belong to")],
    scope: Annotated[list[str], typer.Option(help="read, submit or admin (repeatable)")],
    name: Annotated[str, typer.Option(help="a label")] = "",
) -> None:
    """A new token; its secret is shown this once."""
    row = connect().json("POST", "/v1/tokens", body={"owner": owner, "scopes": scope, "name": name})
    typer.echo(f"token {row['id']} for {row['owner']} ({row['scopes']}):")
    typer.echo(row["token"])


@token_app.command("list")
@friendly
def token_list() -> None:
    table = Table("ID", "OWNER", "NAME", "SCOPES", "CREATED (UTC)", "REVOKED")
    table.columns[0].no_wrap = True
    for row in connect().json("GET", "/v1/tokens"):
        revoked = (row.get("revoked_at") or "")[:19].replace("T", " ")
        table.add_row(row["id"], row["owner"], row["name"], row["scopes"],
                      row["created_at"][:19].replace("T", " "), revoked)  # fmt: skip
    show(table)


@token_app.command("revoke")
@friendly
def token_revoke(token_id: str) -> None:
    connect().request("DELETE", f"/v1/tokens/{token_id}")
    typer.echo(f"token {token_id} revoked")
