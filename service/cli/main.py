"""`numtune`: start the embedded default (`up`, `down`, `api`), talk to the control plane
over REST (`submit`, `status`, `list`, `logs`, `cancel`, `pause`, `resume`, `delete`,
`tune`, `trials`, `token`), and run a spec here without the service (`local run|tune`).

Every failure is one message naming the flag, file or field, and a non-zero exit code;
never a traceback.
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from jobs.storage.paths import numtune_home
from service.cli import launcher
from service.cli.files import files_app
from service.cli.models import models_app, predict
from service.cli.rest import SpecArg, friendly, rest_app, token_app
from service.cli.studies import study_app
from service.platform.local_files import private_dir
from service.serving import http_guard
from service.settings import Settings, load_settings, secret_weakness

app = typer.Typer(
    name="numtune",
    help="Fine-tune language models with numeric-aware losses on Ray.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
local_app = typer.Typer(help="Run a spec in this process's Ray, without the service.")
app.add_typer(rest_app)
app.add_typer(token_app, name="token")
app.add_typer(local_app, name="local")
app.add_typer(models_app, name="models")
app.add_typer(files_app, name="files")
app.add_typer(study_app, name="study")
app.command()(predict)


@app.command("check-secrets")
def check_secrets(
    names: Annotated[list[str], typer.Argument(help="environment variables holding secrets")],
) -> None:
    """Exit 2 if any named variable is unset, a placeholder (REPLACE_ME) or guessable:
    docker/compose.yaml runs this before anything that uses them starts."""
    problems = [
        f"{name} {why}" for name in names if (why := secret_weakness(os.environ.get(name, "")))
    ]
    for line in problems:
        typer.echo(line, err=True)
    if problems:
        raise typer.Exit(2)


# ---- the embedded default ---------------------------------------------------------------


@app.command()
@friendly
def api(
    host: Annotated[str | None, typer.Option(help="bind address [NUMTUNE_HOST]")] = None,
    port: Annotated[int | None, typer.Option(help="port [NUMTUNE_PORT]")] = None,
    dev: Annotated[
        bool | None, typer.Option("--dev/--no-dev", help="no admin token; loopback only")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="API worker processes [NUMTUNE_WORKERS]")
    ] = None,
) -> None:
    """Run the API in the foreground (uvicorn); one of its workers runs the reconciler."""
    given: dict[str, Any] = {"host": host, "port": port, "dev": dev, "workers": workers}
    given = {k: v for k, v in given.items() if v is not None}
    settings = load_settings(**given)
    settings.check_secure()
    settings.check_workers()
    if settings.dev:
        typer.echo("WARNING: --dev: no admin token required to start; loopback only", err=True)
    import uvicorn

    # Workers build the app themselves (`create_app()` reads NUMTUNE_*): the flags travel
    # in the environment, as does the metrics folder, fresh for this start.
    os.environ.update({f"NUMTUNE_{k.upper()}": str(v) for k, v in given.items()})
    with worker_metrics(settings):
        uvicorn.run(
            "service.app:create_app",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            log_level="info",
            log_config=log_config(),
            **server_options(),
        )


def server_options() -> dict[str, Any]:
    """uvicorn options beyond the address: the HTTP/1.1 protocol with a capped request head
    (431 past it) and head and body read timeouts (408), service/serving/http_guard.py.
    uvicorn's default parser (httptools) has no header limit at all."""
    return {"http": http_guard.PROTOCOL, "timeout_keep_alive": 5}


def log_config() -> dict[str, Any]:
    """uvicorn's logging plus ours at INFO, applied by uvicorn in every worker (a spawned
    worker would not inherit a `basicConfig` made here)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["numtune"] = {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}
    config["handlers"]["numtune"] = {
        "class": "logging.StreamHandler",
        "formatter": "numtune",
        "stream": "ext://sys.stderr",
    }
    config["root"] = {"handlers": ["numtune"], "level": "INFO"}
    return config


@contextmanager
def worker_metrics(settings: Settings) -> Iterator[None]:
    """With several workers, a fresh PROMETHEUS_MULTIPROC_DIR for this start, removed after."""
    if settings.workers == 1:
        yield
        return
    from service.health.observability import MULTIPROC_ENV

    folder = tempfile.mkdtemp(prefix="metrics-", dir=private_dir(settings.home / "run"))
    os.environ[MULTIPROC_ENV] = folder
    try:
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@app.command()
@friendly
def up(
    port: Annotated[int, typer.Option(help="API port")] = 8080,
    serve_port: Annotated[int, typer.Option(help="Ray Serve port")] = 8000,
    host: Annotated[str, typer.Option(help="API bind address")] = "127.0.0.1",
    dev: Annotated[bool, typer.Option(help="no admin token; loopback only")] = False,
    num_cpus: Annotated[
        int | None,
        typer.Option(help="CPUs the local Ray head offers (default: cores + 1 for serving)"),
    ] = None,
) -> None:
    """Start a local Ray head (unless NUMTUNE_RAY_ADDRESS is set) and the API; wait for it."""
    settings = load_settings(port=port, serve_port=serve_port, host=host, dev=dev)
    state, started = launcher.up(settings, num_cpus)
    if not started:
        typer.echo(f"numtune is already running at {state.api_url} (`numtune down` stops it)")
        typer.echo(f"dashboard: {state.api_url}/ui")
        return
    ray = f"local Ray head pid {state.ray_pid}" if state.ray_pid else "external Ray"
    typer.echo(f"numtune ready at {state.api_url} (API pid {state.api_pid}; {ray} at "
               f"{state.ray_address}); logs in {Path(state.home) / 'logs'}")  # fmt: skip
    typer.echo(f"dashboard: {state.api_url}/ui (log in with an API token)")
    if state.dev:
        typer.echo(f"dev admin token: {Path(state.home) / 'admin-token'}")


@app.command()
@friendly
def down() -> None:
    """Stop what `numtune up` started (by PID)."""
    home = numtune_home()
    if launcher.State.load(home) is None:
        typer.echo(f"numtune is not running (no {launcher.State.path(home)})")
        return
    for line in launcher.down(home) or ["nothing was running; cleared the stale state"]:
        typer.echo(line)


# ---- without the service ------------------------------------------------------------------


@local_app.command("run")
def local_run(
    spec: SpecArg,
    job_id: Annotated[str | None, typer.Option(help="run id (default: name + spec hash)")] = None,
    storage: Annotated[str | None, typer.Option(help="storage root")] = None,
) -> None:
    """`python -m jobs run SPEC`: train here, on this process's Ray."""
    from jobs.__main__ import main as jobs_main

    extra = [
        *(["--job-id", job_id] if job_id else []),
        *(["--storage", storage] if storage else []),
    ]
    raise typer.Exit(jobs_main(["run", str(spec), *extra]))


@local_app.command("tune")
def local_tune(
    spec: SpecArg,
    tune_id: Annotated[str | None, typer.Option(help="sweep id (default: name + hash)")] = None,
    storage: Annotated[str | None, typer.Option(help="storage root")] = None,
) -> None:
    """`python -m jobs tune SPEC`: sweep here, on this process's Ray."""
    from jobs.__main__ import main as jobs_main

    extra = [
        *(["--tune-id", tune_id] if tune_id else []),
        *(["--storage", storage] if storage else []),
    ]
    raise typer.Exit(jobs_main(["tune", str(spec), *extra]))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
