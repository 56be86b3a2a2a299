"""End to end, real everything: `numtune up --dev` in a subprocess on a fresh NUMTUNE_HOME
(its own Ray head on free ports), REST over loopback, and `numtune down` at the end.

Every process `up` starts inherits NUMTUNE_HOME=<this test's home>, so the test can find
them all (and, as a backstop after `down`, kill only them)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobs.spec import load_spec_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-smmd.yaml"
UP_TIMEOUT_S = 420  # the Ray head, the API, and a Serve replica loading torch
TERMINAL = {"succeeded", "failed", "cancelled"}


def processes_of(home: Path, temp_dir: str | None) -> list[int]:
    """PIDs (not this test's) started for `home`: they carry it in their environment,
    or Ray's temp dir on their command line."""
    marker = f"NUMTUNE_HOME={home}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if marker in environ or (temp_dir and temp_dir in cmdline):
            found.append(int(proc.name))
    return found


def tiny_job(name: str, steps: int) -> dict[str, Any]:
    """examples/tiny-smmd.yaml cut to one worker and a few steps (2 shared cores)."""
    spec = load_spec_file(EXAMPLE)
    spec["name"] = name
    spec["data"] = {**spec["data"], "train_size": 128, "eval_size": 8}  # type: ignore[dict-item]
    spec["train"] = {  # every step reports (log_every 1); evaluate and checkpoint at the end
        **spec["train"],  # type: ignore[dict-item]
        "steps": steps,
        "eval_every": None,
        "checkpoint_every": None,
        "keep_top_k": 1,
    }
    spec["scaling"] = {"num_workers": 1, "cpus_per_worker": 1}
    return spec


@dataclass
class Numtune:
    home: Path
    env: dict[str, str]
    url: str
    serve_url: str
    up_output: str = ""  # what `numtune up` printed

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "service.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def http(self) -> httpx.Client:
        token = (self.home / "admin-token").read_text().strip()
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def state(self) -> dict[str, Any]:
        import json

        data: dict[str, Any] = json.loads((self.home / "run" / "state.json").read_text())
        return data


def wait_for_job(
    http: httpx.Client, job_id: str, timeout_s: float, until: Any = None
) -> dict[str, Any]:
    """Poll until `until(job)` (default: the job ended); fail with the record on timeout."""
    until = until or (lambda job: job["status"] in TERMINAL)
    deadline = time.monotonic() + timeout_s
    while True:
        job: dict[str, Any] = http.get(f"/v1/jobs/{job_id}").json()
        if until(job):
            return job
        assert time.monotonic() < deadline, f"timed out waiting on {job_id}: {job}"
        time.sleep(0.5)


def registered_model(http: httpx.Client, name: str, timeout_s: float = 60) -> dict[str, Any]:
    """The model `name` once it has a version: the reconciler registers a job's checkpoint
    right after the job succeeds, a poll or two later."""
    deadline = time.monotonic() + timeout_s
    while not (model := http.get(f"/v1/models/{name}").json()).get("versions"):
        assert time.monotonic() < deadline, model
        time.sleep(1)
    found: dict[str, Any] = model
    return found


@contextlib.contextmanager
def running_numtune(home: Path) -> Iterator[Numtune]:
    """`numtune up --dev` on `home` (free ports), yielded; `down` and a backstop kill after.
    A test that stops, kills or restarts the stack uses `numtune_up` (its own); the others
    share one (`shared_numtune`, tests/conftest.py)."""
    from service.cli.processes import free_ports

    cleared = ("NUMTUNE_", "RAY_ADDRESS", "RAY_AUTH_TOKEN")
    env = {k: v for k, v in os.environ.items() if not k.startswith(cleared)}
    env["NUMTUNE_HOME"] = str(home)
    # The dashboard's Study page reads the committed accuracy study (tests/browser).
    env["NUMTUNE_STUDY_RESULTS"] = str(Path(__file__).resolve().parents[2] / "bench" / "results")
    port, serve_port = free_ports(2)
    numtune = Numtune(home, env, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{serve_port}")
    temp_dir = None
    try:
        started = time.monotonic()
        result = numtune.cli(
            "up",
            "--dev",
            "--port",
            str(port),
            "--serve-port",
            str(serve_port),
            timeout=UP_TIMEOUT_S,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        print(f"numtune up: {time.monotonic() - started:.1f} s")
        numtune.up_output = result.stdout
        temp_dir = numtune.state().get("ray_temp_dir")
        yield numtune
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):  # the backstop below still runs
            numtune.cli("down")
        for pid in processes_of(home, temp_dir):  # only if a test failed before its own down
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def numtune_up(tmp_path: Path) -> Iterator[Numtune]:
    with running_numtune(tmp_path / "home") as numtune:
        yield numtune
