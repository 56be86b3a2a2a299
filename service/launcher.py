"""`numtune up` / `numtune down`: the embedded default on one machine.

`up` starts a local Ray head (unless NUMTUNE_RAY_ADDRESS names one) and the API process,
each a detached child in its own session whose PID is kept in `<home>/run/`. `down` stops
exactly those PIDs (SIGTERM, then SIGKILL) and never runs `ray stop`, which would stop
every Ray head of this user on the machine, not only ours.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from service.client import resolve_token
from service.local_files import private_dir, write_secret
from service.processes import (
    LaunchError,
    alive,
    free_ports,
    port_in_use,
    spawn,
    stop_group,
    stop_pid,
    tail,
    wait_until,
)
from service.settings import Settings

log = logging.getLogger(__name__)

RAY_START_TIMEOUT_S = 120.0
API_READY_TIMEOUT_S = 90.0
PORT_FREE_WAIT_S = 15.0
# A Serve replica loads torch and transformers: 30-60 s on 2 busy cores.
SERVE_READY_TIMEOUT_S = 240.0
# SIGKILL would leave the head's raylet and GCS behind: give its own teardown time.
RAY_STOP_TIMEOUT_S = 60.0
API_MARKER = "service.cli"  # in the API process's command line: guards against PID reuse
RAY_MARKER = "ray"
# The ports `ray start --head` would otherwise take at fixed defaults (6379, 8265, 10001,
# ...): each gets a free one so several heads (tests, users) can share a machine.
RAY_PORT_FLAGS = {
    "gcs": "--port",
    "dashboard": "--dashboard-port",
    "client": "--ray-client-server-port",
    "node_manager": "--node-manager-port",
    "object_manager": "--object-manager-port",
    "agent_listen": "--dashboard-agent-listen-port",
    "agent_grpc": "--dashboard-agent-grpc-port",
    "runtime_env_agent": "--runtime-env-agent-port",
    "metrics_export": "--metrics-export-port",
}
# Two more that only environment variables move (defaults 44217 and 44227).
RAY_PORT_ENV = {
    "autoscaler_metrics": "AUTOSCALER_METRIC_PORT",
    "dashboard_metrics": "DASHBOARD_METRIC_PORT",
}


@dataclass
class State:
    """What `up` started, in `<home>/run/state.json`; `down` reads it back."""

    home: str
    api_url: str
    api_port: int
    api_host: str
    dev: bool
    serve_port: int
    ray_address: str
    api_pid: int | None = None
    ray_pid: int | None = None  # None: an external Ray (NUMTUNE_RAY_ADDRESS) we do not own
    ray_temp_dir: str | None = None
    ray_token_path: str | None = None
    ray_ports: dict[str, int] = field(default_factory=dict)
    started_at: float = field(default_factory=time.time)

    @staticmethod
    def path(home: Path) -> Path:
        return home / "run" / "state.json"

    @classmethod
    def load(cls, home: Path) -> State | None:
        path = cls.path(home)
        if not path.exists():
            return None
        try:
            return cls(**json.loads(path.read_text()))
        except (ValueError, TypeError) as error:
            raise LaunchError(f"{path} is damaged ({error}); remove it by hand") from error

    def save(self) -> None:
        path = self.path(Path(self.home))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)


# ---- the Ray head --------------------------------------------------------------------------


def ray_env(home: Path, token_path: Path) -> dict[str, str]:
    """The environment of the head, and so of every Ray job it runs."""
    env = dict(os.environ)
    for key in ("RAY_ADDRESS", "RAY_AUTH_TOKEN"):  # ours, not a cluster the caller points at
        env.pop(key, None)
    env.update(NUMTUNE_HOME=str(home), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token_path))
    # On Linux Ray swaps --node-ip-address 127.0.0.1 for the machine's address and binds
    # GCS, raylet and the client server there. This switch (Ray's single-machine mode, on
    # by default on macOS) keeps the node on loopback: nothing of it faces the network.
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    # At Ray's default health-check interval (2 s) each ray.train.report call blocked
    # ~2 s; 0.2 s makes reports cheap. One thread per worker: workers share the cores.
    env.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")
    env.setdefault("OMP_NUM_THREADS", "1")
    # On SIGTERM a head first drains (waits for leases to end) for up to 30 s by default;
    # `down` means stop, so keep that short.
    env.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "5")
    return env


def _ray_exe() -> str:
    beside = Path(sys.executable).with_name("ray")  # the venv's `ray`, same install as ours
    found = str(beside) if beside.exists() else shutil.which("ray")
    if found is None:
        raise LaunchError("the `ray` command is not installed (pip install 'ray[default]')")
    return found


def start_ray_head(state: State, num_cpus: int | None = None) -> None:
    """`ray start --head --block` on loopback with token auth; fills state.ray_*."""
    # Here, not at the top: the module brings the database layer and pyarrow, which every
    # other CLI command would then load for nothing.
    from service.ray_backend import jobs_api_answers

    home = Path(state.home)
    token_path = write_secret(home / "ray-token", secrets.token_hex(32))
    token = token_path.read_text().strip()
    # Short: Ray puts unix sockets below it and their paths are limited to 107 bytes.
    temp_dir = tempfile.mkdtemp(prefix="nt", dir="/tmp")
    names = [*RAY_PORT_FLAGS, *RAY_PORT_ENV]
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    cmd = [_ray_exe(), "start", "--head", "--block", "--disable-usage-stats"]
    cmd += ["--node-ip-address", "127.0.0.1", "--dashboard-host", "127.0.0.1"]
    cmd += ["--include-dashboard", "true", "--temp-dir", temp_dir]
    cmd += ["--min-worker-port", "0", "--max-worker-port", "0"]  # 0 = any free port
    for name, flag in RAY_PORT_FLAGS.items():
        cmd += [flag, str(ports[name])]
    # The serving replica reserves a CPU (NUMTUNE_SERVE_REPLICA_CPUS) but idles until
    # queried: offer one logical CPU more than the machine has, so a job may still take
    # every core (the demo's one worker asks for both of a 2-core machine).
    cmd += ["--num-cpus", str(num_cpus if num_cpus is not None else (os.cpu_count() or 1) + 1)]
    log_path = home / "logs" / "ray-head.log"
    env = ray_env(home, token_path)
    env.update({var: str(ports[name]) for name, var in RAY_PORT_ENV.items()})
    # Ray's own actors (Train's placement-group cleaner, the state API) look the cluster
    # up by RAY_ADDRESS, else by scanning for GCS processes, which fails ("multiple
    # active Ray instances") whenever another head runs on the machine.
    env["RAY_ADDRESS"] = f"127.0.0.1:{ports['gcs']}"
    state.ray_pid = spawn(cmd, env, log_path)
    state.ray_temp_dir, state.ray_token_path, state.ray_ports = temp_dir, str(token_path), ports
    state.ray_address = f"http://127.0.0.1:{ports['dashboard']}"
    state.save()  # from here on `down` can stop it, even if the rest of `up` fails
    log.info("Ray head pid %d starting, Jobs API at %s", state.ray_pid, state.ray_address)
    wait_until(
        lambda: jobs_api_answers(state.ray_address, token),
        state.ray_pid,
        "the Ray head",
        log_path,
        RAY_START_TIMEOUT_S,
    )


def stop_ray_head(state: State) -> bool:
    """Stop our head by PID; `ray start --block` takes its raylet, GCS and workers down."""
    stopped = stop_pid(state.ray_pid, RAY_MARKER, RAY_STOP_TIMEOUT_S)
    if stopped and state.ray_pid is not None:
        # The head started in its own session, so its group is what it started; Ray's
        # teardown leaves e.g. the dashboard's multiprocessing forkserver to exit late.
        stop_group(state.ray_pid)
    if state.ray_temp_dir and Path(state.ray_temp_dir).is_dir():
        shutil.rmtree(state.ray_temp_dir, ignore_errors=True)
    return stopped


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
    cmd = [sys.executable, "-m", "service.serving", "deploy", "--port", str(state.serve_port)]
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
