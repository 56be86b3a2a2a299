"""`make demo` at a minimal setting: the same module on examples/demo-units.yaml, cut to a
few steps and a few held-out questions, on a fresh NUMTUNE_HOME and free ports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.data import load_task
from jobs.spec import JobSpec
from service.cli.demo import EXAMPLE, demo_specs
from tests.e2e.conftest import processes_of

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_demo_trains_both_losses_compares_them_serves_and_stops(tmp_path: Path) -> None:
    from service.cli.processes import free_ports

    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMTUNE_", "RAY_"))}
    port, serve_port = free_ports(2)
    env.update(NUMTUNE_HOME=str(home), NUMTUNE_PORT=str(port), NUMTUNE_SERVE_PORT=str(serve_port))
    argv = ["--steps", "4", "--eval-size", "6", "--samples", "2"]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "service.cli.demo", *argv],
            env={**env, "COLUMNS": "250"},
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        for pid in processes_of(home, None):  # only if the demo's own `down` did not run
            os.kill(pid, signal.SIGKILL)
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-4000:]
    assert "min on 2 idle cores" in out.split("numtune up")[0]  # the estimate comes first
    # Both jobs ran and were registered; the table has the untrained row and one per loss.
    assert "demo-units-smmd:1" in out and "demo-units-ce:1" in out
    table = out.split("held-out questions", 1)[1]
    for row in ("untrained", "smmd (demo-units-smmd:1)", "ce (demo-units-ce:1)"):
        assert row in table
    # The served answers stand next to the true answers of the same held-out questions.
    spec = JobSpec.model_validate(demo_specs(EXAMPLE, 4, 6)[0])
    first = load_task(spec.data).eval[0]
    served = out.split("served answers", 1)[1]
    assert first.prompt in served and f" {first.answer} " in served
    assert "numtune predict" in out and "demo took" in out
    assert not processes_of(home, None), "numtune down left processes behind"
