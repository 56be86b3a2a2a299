"""`numtune up` / `numtune down`: the embedded default on one machine.

`up` starts a local Ray head (unless NUMTUNE_RAY_ADDRESS names one; `ray_head.py`) and
the API process, each a detached child in its own session whose PID is kept in
`<home>/run/` (`state.py`). `down` stops exactly those PIDs (SIGTERM, then SIGKILL) and
never runs `ray stop`, which would stop every Ray head of this user on the machine, not
only ours.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from service.cli.client import resolve_token
from service.cli.processes import (
    LaunchError,
    alive,
    port_in_use,
    spawn,
    stop_pid,
    tail,
    wait_until,
)
from service.cli.ray_head import ray_env, start_ray_head, stop_ray_head
from service.cli.state import State
from service.platform.local_files import private_dir
from service.settings import Settings

log = logging.getLogger(__name__)

API_READY_TIMEOUT_S = 90.0
PORT_FREE_WAIT_S = 15.0
# A Serve replica loads torch and transformers: 30-60 s on 2 busy cores.
SERVE_READY_TIMEOUT_S = 240.0
API_MARKER = "service.cli"  # in the API process's command line: guards against PID reuse


# ---- the API process -------------------------------------------------------------------------


def api_pid_file(home: Path) -> Path:
    return home / "run" / "api.pid"


def readyz_answers(url: str, home: Path, last: list[str]) -> bool:
    token = resolve_token(home)
    if token is None:
        return False  # --dev writes <home>/admin-token when the app starts
    try:
        reply = httpx.get(f"{url}/readyz", headers={"Authorization": f"Bearer {token}"}, timeout=5)
    except httpx.HTTPError as error:
        last[:] = [str(error)]
        return False
    last[:] = [reply.text[:500]]
    return reply.status_code == 200


def start_api(state: State, timeout_s: float = API_READY_TIMEOUT_S) -> int:
    """Start `python -m service.cli api` as up does, detached; return once /readyz is 200.

    Also the way to bring the API back after it died: the reconciler picks every
    unfinished job up again from the database.
    """
    home = Path(state.home)
    # Right after an API died its port can take a moment to be free again: wait a little.
    deadline = time.monotonic() + PORT_FREE_WAIT_S
    while port_in_use(state.api_host, state.api_port):
        if time.monotonic() > deadline:
            raise LaunchError(f"--port {state.api_port}: {state.api_host} has it in use already")
        time.sleep(0.5)
    env = dict(os.environ)
    env.update(NUMTUNE_HOME=str(home), NUMTUNE_RAY_ADDRESS=state.ray_address)
    # The dashboard's Ask page calls the serving app that `up` deploys on this port.
    env["NUMTUNE_SERVE_PORT"] = str(state.serve_port)
    if state.ray_token_path:
        env.pop("RAY_AUTH_TOKEN", None)
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=state.ray_token_path)
    cmd = [sys.executable, "-m", API_MARKER, "api", "--host", state.api_host]
    cmd += ["--port", str(state.api_port), "--dev" if state.dev else "--no-dev"]
    log_path = home / "logs" / "api.log"
    state.api_pid = spawn(cmd, env, log_path)
    api_pid_file(home).write_text(f"{state.api_pid}\n")
    state.save()
    last: list[str] = []
    try:
        wait_until(
            lambda: readyz_answers(state.api_url, home, last),
            state.api_pid,
            "the API",
            log_path,
            timeout_s,
        )
    except LaunchError as error:
        stop_pid(state.api_pid, API_MARKER)  # never leave a half-started API behind
        raise LaunchError(f"{error}\nlast /readyz answer: {last[0] if last else 'none'}") from None
    return state.api_pid


# ---- up / down -------------------------------------------------------------------------------


def start_serving(state: State, timeout_s: float = SERVE_READY_TIMEOUT_S) -> None:
    """Deploy the Ray Serve app on the head (HTTP on 127.0.0.1:`serve_port`) and wait
    until it answers /healthz. Serve lives in the head, so stopping the head stops it."""
    home = Path(state.home)
    env = dict(os.environ)
    if state.ray_token_path:
        env = ray_env(home, Path(state.ray_token_path))
    if state.ray_ports.get("gcs"):
        env["RAY_ADDRESS"] = f"127.0.0.1:{state.ray_ports['gcs']}"
    log_path = home / "logs" / "serving.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "service.serving.deploy",
        "deploy",
        "--port",
        str(state.serve_port),
    ]
    with log_path.open("ab") as out:
        done = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s)
    if done.returncode != 0:
        raise LaunchError(f"deploying serving failed; log {log_path}:\n{tail(log_path)}")
    url = f"http://127.0.0.1:{state.serve_port}/healthz"
    wait_until(lambda: _answers(url), state.ray_pid, "serving", log_path, timeout_s)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def running(state: State) -> bool:
    api_up = state.api_pid is not None and alive(state.api_pid)
    return api_up and (state.ray_pid is None or alive(state.ray_pid))


def up(settings: Settings, num_cpus: int | None = None) -> tuple[State, bool]:
    """Start what is not running; (state, False) when everything already was."""
    settings.check_secure()
    home = private_dir(settings.home.expanduser().resolve())
    old = State.load(home)
    if old is not None and running(old):
        return old, False
    if old is not None and old.ray_pid is not None and alive(old.ray_pid):
        log.info("the Ray head (pid %d) runs but the API does not: starting the API", old.ray_pid)
        start_api(old)
        return old, True
    if old is not None:
        down(home)  # half-stopped leftovers from an earlier run
    state = State(
        home=str(home),
        # A wildcard bind is still reached, from here, on loopback.
        api_url=f"http://{'127.0.0.1' if settings.host in ('0.0.0.0', '::') else settings.host}"
        f":{settings.port}",
        api_port=settings.port,
        api_host=settings.host,
        dev=settings.dev,
        serve_port=settings.serve_port,
        ray_address=settings.ray_address or "",
    )
    try:
        if port_in_use(settings.host, settings.port):
            raise LaunchError(f"--port {settings.port}: {settings.host} has it in use already")
        if not settings.ray_address:
            start_ray_head(state, num_cpus)
        start_api(state)
        start_serving(state)
    except BaseException:
        down(home)  # stop what this `up` started, nothing else
        raise
    return state, True


def down(home: Path) -> list[str]:
    """Stop what `up` recorded, by PID; what was stopped, as lines for the user."""
    state = State.load(home)
    if state is None:
        return []
    done = []
    if stop_pid(state.api_pid, API_MARKER):
        done.append(f"stopped the API (pid {state.api_pid})")
    if stop_ray_head(state):
        done.append(f"stopped the Ray head (pid {state.ray_pid})")
    api_pid_file(home).unlink(missing_ok=True)
    State.path(home).unlink(missing_ok=True)
    return done
