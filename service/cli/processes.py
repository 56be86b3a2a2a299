"""Child processes of `numtune up`: spawn detached, wait until ready, stop by PID (with a
guard against a recycled PID), and the small helpers around them (free ports, secrets)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 30.0


class LaunchError(Exception):
    """`up` could not start something; the message says what and where its log is."""


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie child of ours is reaped and counts as gone)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False
    except ChildProcessError:
        pass  # not our child: the normal case after `up` exited
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    # Field 3 of /proc/<pid>/stat is the state; Z = exited, not yet reaped by its parent.
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z")


def is_ours(pid: int, marker: str) -> bool:
    """The PID still runs the program we started (not a recycled PID)."""
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.parent.exists():
        return True  # no procfs (macOS): trust the PID file
    try:
        return marker in cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False


def stop_pid(pid: int | None, marker: str, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM, then SIGKILL after `timeout_s`. False when it was not running."""
    if pid is None or not alive(pid) or not is_ours(pid, marker):
        return False
    os.kill(pid, signal.SIGTERM)
    if wait_gone(pid, timeout_s):
        return True
    log.warning("pid %d ignored SIGTERM for %.0f s; killing it", pid, timeout_s)
    os.kill(pid, signal.SIGKILL)
    wait_gone(pid, 10.0)
    return True


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`, from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # After the ")" closing the command name: state, ppid, pgrp, ...
            fields = stat.read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue  # exited while we looked
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


def stop_group(pgid: int, timeout_s: float = 20.0) -> list[int]:
    """After a group leader we spawned has exited: give what it started (its process
    group) `timeout_s` to exit on its own, then SIGKILL the rest. Returns what was killed."""
    if not Path("/proc").is_dir():
        return []  # no procfs: the leader's own teardown is all we have
    deadline = time.monotonic() + timeout_s
    while members := group_members(pgid):
        if time.monotonic() > deadline:
            log.warning("process group %d still has %s; killing them", pgid, members)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            return members
        time.sleep(0.2)
    return []


def wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def spawn(cmd: list[str], env: dict[str, str], log_path: Path) -> int:
    """A detached child (own session: Ctrl-C on `up` does not reach it), output to log."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    return proc.pid


def tail(path: Path, lines: int = 25) -> str:
    if not path.exists():
        return f"(no log at {path})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def wait_until(
    check: Callable[[], bool], pid: int | None, what: str, log_path: Path, timeout_s: float
) -> None:
    """Until `check()` holds; fail early if process `pid` (when given) dies meanwhile."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if pid is not None and not alive(pid):
            raise LaunchError(f"{what} exited while starting; end of {log_path}:\n{tail(log_path)}")
        if time.monotonic() > deadline:
            raise LaunchError(
                f"{what} not ready after {timeout_s:.0f} s; end of {log_path}:\n{tail(log_path)}"
            )
        time.sleep(0.5)


# Fixed ports any default Ray head on the machine binds (GCS, dashboard, client, its two
# metrics servers) and numtune's own defaults: never hand these out, another process
# started a moment later would take them.
WELL_KNOWN = frozenset({6379, 8000, 8080, 8265, 10001, 44217, 44227})


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 now (held open together so none repeats)."""
    sockets: list[socket.socket] = []
    try:
        while len(sockets) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            if s.getsockname()[1] in WELL_KNOWN:
                s.close()
                continue
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def port_in_use(host: str, port: int) -> bool:
    """Whether a server could not bind `port` now. A bind test with SO_REUSEADDR (what
    uvicorn does), not a connect: a connect can succeed with nobody listening (a TCP
    self-connect from an ephemeral port) and fails on ports in TIME_WAIT."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
        return False
