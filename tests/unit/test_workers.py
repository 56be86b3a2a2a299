"""Several API workers: the settings that cannot work are refused, only the lease holder
runs reconciler passes, and /metrics sums every worker's counters."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.cli.main import app
from service.health.observability import MULTIPROC_ENV, JobsCollector, exposition
from service.platform.loop import SupervisedLoop
from service.settings import Settings, UnworkableSettingsError, sqlite_in_memory

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("url", "memory"),
    [
        ("sqlite://", True),
        ("sqlite:///:memory:", True),
        ("sqlite+pysqlite:///:memory:", True),
        ("sqlite:///file:x?mode=memory&uri=true", True),
        ("sqlite:///numtune.db", False),
        ("sqlite:////var/lib/numtune/numtune.db", False),
        ("postgresql+psycopg://u@db:5432/numtune", False),
    ],
)
def test_in_memory_sqlite_is_recognised(url: str, memory: bool) -> None:
    assert sqlite_in_memory(url) is memory


def test_several_workers_need_a_shared_database(tmp_path: Path) -> None:
    Settings(home=tmp_path, workers=1, db_url="sqlite://").check_workers()
    Settings(home=tmp_path, workers=4).check_workers()  # the SQLite file under home
    with pytest.raises(UnworkableSettingsError, match="in-memory SQLite"):
        Settings(home=tmp_path, workers=2, db_url="sqlite:///:memory:").check_workers()


def test_cli_refuses_workers_on_an_in_memory_database(tmp_path: Path) -> None:
    env = {"NUMTUNE_HOME": str(tmp_path), "NUMTUNE_DB_URL": "sqlite://"}
    result = CliRunner().invoke(app, ["api", "--dev", "--workers", "3"], env=env)
    assert result.exit_code == 2
    assert "refusing to start: --workers 3 with an in-memory SQLite database" in result.output


class SwitchLease:
    """A lease some other process holds until `free` is set."""

    def __init__(self) -> None:
        self.free = threading.Event()
        self.released = False

    def acquire(self, wait: bool = False) -> bool:
        return self.free.is_set()

    def release(self) -> None:
        self.released = True


class Counting(SupervisedLoop):
    def __init__(self, lease: SwitchLease):
        super().__init__(0.01, lease)
        self.runs = 0

    def run_once(self) -> None:
        self.runs += 1
        self.passed()


def test_only_the_lease_holder_runs_passes() -> None:
    lease = SwitchLease()
    loop = Counting(lease)
    loop.start()
    try:
        time.sleep(0.3)
        assert (loop.runs, loop.leading) == (0, False)
        assert loop.passes > 0 and loop.health() == "ok"  # standing by is healthy
        lease.free.set()  # the holder died
        deadline = time.monotonic() + 5
        while loop.runs == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert loop.leading
    finally:
        loop.stop()
    assert lease.released and not loop.leading


WORKER = """
from service.health.observability import REQUESTS
for _ in range(int(__import__("sys").argv[1])):
    REQUESTS.labels("GET", "/healthz", "200").inc()
"""


def test_metrics_sum_every_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, MULTIPROC_ENV: str(tmp_path), "PYTHONPATH": str(REPO)}
    for count in (3, 4):  # two workers, each its own process that has exited since
        subprocess.run([sys.executable, "-c", WORKER, str(count)], env=env, check=True)
    jobs = JobsCollector(lambda: {("job", "queued"): 2})
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    text = exposition(jobs).decode()
    assert 'numtune_http_requests_total{method="GET",route="/healthz",status="200"} 7.0' in text
    assert 'numtune_jobs{kind="job",status="queued"} 2.0' in text
