"""The local Ray head of `numtune up`: `ray start --head --block` on loopback with token
auth and a free port for everything it would otherwise bind at fixed defaults; stopped by
its PID, never by `ray stop` (which stops every head of this user on the machine).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

from service.cli.processes import LaunchError, free_ports, spawn, stop_group, stop_pid, wait_until
from service.cli.state import State
from service.platform.local_files import write_secret

log = logging.getLogger(__name__)

RAY_START_TIMEOUT_S = 120.0
# SIGKILL would leave the head's raylet and GCS behind: give its own teardown time.
RAY_STOP_TIMEOUT_S = 60.0
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
    from service.backends.ray_backend import jobs_api_answers

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
