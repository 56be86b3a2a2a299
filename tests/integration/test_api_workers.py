"""`numtune api --workers 2` for real (uvicorn, two worker processes, one SQLite file; no
Ray needed: no job is submitted): one reconciler, and /metrics counts every worker's
requests whichever worker answers the scrape."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from service.cli.processes import free_ports

REPO = Path(__file__).resolve().parents[2]
HEALTHZ = re.compile(
    r'numtune_http_requests_total\{method="GET",route="/healthz",status="200"\} ([\d.]+)'
)


def test_two_workers_one_reconciler_summed_metrics(tmp_path: Path) -> None:
    port, closed = free_ports(2)
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMTUNE_")}
    env.update(NUMTUNE_HOME=str(home), NUMTUNE_RAY_ADDRESS=f"http://127.0.0.1:{closed}")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    log_path = tmp_path / "api.log"
    cmd = [sys.executable, "-m", "service.cli", "api", "--dev", "--workers", "2"]
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [*cmd, "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    answered = 0
    try:
        deadline = time.monotonic() + 120
        # Both workers up (each logs its start), and the lease taken by one of them.
        while log_path.read_text().count("Application startup complete") < 2:
            assert server.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        for _ in range(40):  # a new connection each: the kernel spreads them over workers
            answered += httpx.get(f"{url}/healthz", timeout=10).status_code == 200
        token = (home / "admin-token").read_text().strip()
        auth = {"Authorization": f"Bearer {token}"}
        for _ in range(6):  # whichever worker answers, it reports both workers' counts
            text = httpx.get(f"{url}/metrics", headers=auth, timeout=10).text
            assert [float(n) for n in HEALTHZ.findall(text)] == [answered]
        time.sleep(1.5)  # a few lease retries of the worker standing by
        # Each loop (reconciler, registrar, studies) is led by one worker only.
        text = log_path.read_text()
        for loop in ("reconciler", "registrar", "studies"):
            assert len(re.findall(rf"{loop} \(pid \d+\) took the lease", text)) == 1, text
        assert len(list((home / "run").glob("metrics-*"))) == 1
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    assert not list((home / "run").glob("metrics-*"))  # removed with the service
