"""The issue's "Must show": `numtune up` → REST submit → a real Ray job on the local head
→ succeeded with metrics and logs in our database → `numtune down` leaves nothing; an API
killed with SIGKILL mid-run comes back and the job's record is still complete; and a job
running when the whole stack goes down goes on from its latest checkpoint after the next
`up`, whose Ray head has never heard of it."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from jobs.records.models import MetricsRow
from jobs.records.restore import restore_step
from jobs.records.run_files import RunFiles
from service.cli import launcher
from service.cli.processes import wait_gone
from tests.e2e.conftest import UP_TIMEOUT_S, Numtune, processes_of, tiny_job, wait_for_job

pytestmark = [pytest.mark.ray, pytest.mark.slow]
LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}
JOB_TIMEOUT_S = 300  # generous: the 2 cores are often shared with other work
SAME = ("loss", "ce", "smmd", "lr", "grad_norm")  # what a repeated step must repeat exactly


def from_db(home: Path, job_id: str) -> tuple[str, list[int], str]:
    """(status, metric steps, whole log) read straight from the SQLite file."""
    with sqlite3.connect(home / "numtune.db") as db:
        (status,) = db.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
        steps = [s for (s,) in db.execute(
            "SELECT step FROM job_metrics WHERE job_id = ? ORDER BY seq", (job_id,))]  # fmt: skip
        text = "".join(t for (t,) in db.execute(
            "SELECT text FROM job_logs WHERE job_id = ? ORDER BY seq", (job_id,)))  # fmt: skip
    return status, steps, text


def assert_complete(numtune: Numtune, http: httpx.Client, job: dict[str, Any], steps: int) -> None:
    """Succeeded, every step's report, and the log up to the run's last line: by REST and
    in the database file."""
    job_id = job["id"]
    assert job["status"] == "succeeded", job
    assert job["metrics_count"] == steps and job["final_metrics"]["eval_exact_match"] >= 0
    rows = http.get(f"/v1/jobs/{job_id}/metrics").json()["items"]
    assert [r["step"] for r in rows] == list(range(1, steps + 1))
    assert all(r["loss"] > 0 for r in rows)
    assert "eval_exact_match" in rows[-1] and rows[-1].get("checkpoint")
    logs = http.get(f"/v1/jobs/{job_id}/logs").text
    # `python -m jobs run` prints this as its last line; the copy must reach it.
    assert f"job {job_id}: succeeded" in logs
    status, db_steps, db_logs = from_db(numtune.home, job_id)
    assert (status, db_steps, db_logs) == ("succeeded", list(range(1, steps + 1)), logs)


def listening(pids: list[int]) -> dict[str, set[str]]:
    """Per process name (`ray::RayTrainWorker`, ...), the addresses it listens on."""
    found: dict[str, set[str]] = {}
    for pid in pids:
        try:
            process = psutil.Process(pid)
            name = " ".join(process.cmdline())[:40]
            conns = process.net_connections(kind="inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        found.setdefault(name, set()).update(
            c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN
        )
    return found


@contextlib.contextmanager
def watch_listeners(numtune: Numtune) -> Iterator[dict[str, set[str]]]:
    """Every 0.1 s while active, what each process of this `up` listens on (merged): a
    job's workers live for its whole run, so their sockets are seen however short it is."""
    seen: dict[str, set[str]] = {}
    done = threading.Event()
    temp_dir = numtune.state()["ray_temp_dir"]

    def poll() -> None:
        while not done.wait(0.1):
            for name, addresses in listening(processes_of(numtune.home, temp_dir)).items():
                seen.setdefault(name, set()).update(addresses)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join()


def down_leaves_nothing(numtune: Numtune) -> None:
    state = numtune.state()
    result = numtune.cli("down")
    assert result.returncode == 0, result.stderr
    assert f"stopped the Ray head (pid {state['ray_pid']})" in result.stdout
    deadline = time.monotonic() + 30  # Ray's workers exit when they see the raylet gone
    while left := processes_of(numtune.home, state["ray_temp_dir"]):
        if time.monotonic() > deadline:
            shown = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:200] for pid in left}
            pytest.fail(f"left behind by `numtune down`: {shown}")
        time.sleep(0.5)
    assert not Path(state["ray_temp_dir"]).exists()
    assert not (numtune.home / "run" / "state.json").exists()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{numtune.url}/healthz")


def test_up_submit_api_killed_mid_run_comes_back_and_down_leaves_nothing(
    numtune_up: Numtune, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole story on one stack: one `up` (about 40 s) fewer than a stack per step."""
    numtune = numtune_up
    # 1. `up` keeps its secrets private, and a second `up` finds the first.
    for secret in ("admin-token", "ray-token"):
        assert (numtune.home / secret).stat().st_mode & 0o777 == 0o600
    again = numtune.cli("up", "--dev", "--port", numtune.url.rsplit(":", 1)[1])
    assert again.returncode == 0 and "already running" in again.stdout
    state = numtune.state()
    assert {state["ray_pid"], state["api_pid"]} <= set(
        processes_of(numtune.home, state["ray_temp_dir"])
    )
    steps = 30
    # 2. Ray, the API (both of them), serving and the job's workers (torch's process group:
    # issue 30 item 6), watched while the job runs: none of them may face the network.
    with watch_listeners(numtune) as seen:
        with numtune.http() as http:
            created = http.post("/v1/jobs", json=tiny_job("e2e-up", steps))
            assert created.status_code == 202, created.text
            job_id = created.json()["id"]
            wait_for_job(http, job_id, JOB_TIMEOUT_S, until=lambda j: j["metrics_count"] >= 2)
        # 3. The API is killed with SIGKILL mid-run and started again exactly as `up` does
        # (same environment, same state); the reconciler picks the job up again.
        api_pid = int((numtune.home / "run" / "api.pid").read_text())
        os.kill(api_pid, signal.SIGKILL)
        assert wait_gone(api_pid, 10)
        status, steps_at_kill, _ = from_db(numtune.home, job_id)
        assert status == "running" and len(steps_at_kill) < steps  # killed mid-run
        for key, value in numtune.env.items():
            monkeypatch.setenv(key, value)
        restored = launcher.State.load(numtune.home)
        assert restored is not None
        new_pid = launcher.start_api(restored)
        assert new_pid != api_pid
        assert int((numtune.home / "run" / "api.pid").read_text()) == new_pid
        # 4. The job's record is complete, by REST and in the database file.
        with numtune.http() as http:
            job = wait_for_job(http, job_id, JOB_TIMEOUT_S)
            assert_complete(numtune, http, job, steps)
    workers = [name for name in seen if "RayTrainWorker" in name]
    assert workers and any(seen[name] for name in workers), seen  # the probe saw the job run
    facing = {name: found for name, addresses in seen.items() if (found := addresses - LOOPBACK)}
    assert not facing, facing
    listed = numtune.cli("list", "--status", "succeeded")
    assert listed.returncode == 0 and job_id in listed.stdout
    # 5. `numtune down` with a job mid-run leaves nothing; the next `up` takes the job on.
    down_mid_run_and_up_again(numtune)
    # 6. `numtune down` leaves nothing.
    down_leaves_nothing(numtune)


def past_a_checkpoint(run: RunFiles) -> bool:
    """Ray has recorded a checkpoint of the run, and it has reported a step past it."""
    try:
        step = restore_step(run)
    except ValueError:  # Ray is writing its record just now
        return False
    return step > 0 and any(row.step > step for row in run.read_metrics())


def down_mid_run_and_up_again(numtune: Numtune) -> None:
    """The new head does not know the job: it goes back to the queue and on from its latest
    checkpoint (its driver outlives the old head and writes that its workers died). Each
    step is reported once, and those it runs again repeat the lost attempt's numbers. The
    job is long (`down` takes seconds, and it trains meanwhile), so it is cancelled once the
    resumed run has passed the step where the lost one stopped."""
    spec = tiny_job("e2e-resume", 2000)
    spec["train"] = {**spec["train"], "eval_every": 20, "checkpoint_every": 20, "keep_top_k": 2}
    with numtune.http() as http:
        created = http.post("/v1/jobs", json=spec)
        assert created.status_code == 202, created.text
        job_id = created.json()["id"]
        run = RunFiles.for_job(job_id, str(numtune.home / "storage"))
        wait_for_job(http, job_id, JOB_TIMEOUT_S, until=lambda _: past_a_checkpoint(run))
    down_leaves_nothing(numtune)
    lost: list[MetricsRow] = run.read_metrics()
    step, last = restore_step(run), lost[-1].step
    assert 0 < step < last, (step, last)
    ports = ("--port", numtune.url.rsplit(":", 1)[1])
    ports += ("--serve-port", numtune.serve_url.rsplit(":", 1)[1])
    up = numtune.cli("up", "--dev", *ports, timeout=UP_TIMEOUT_S)
    assert up.returncode == 0, up.stdout + up.stderr
    with numtune.http() as http:
        job = wait_for_job(http, job_id, JOB_TIMEOUT_S, until=lambda j: j["metrics_count"] > last)
        assert http.post(f"/v1/jobs/{job_id}/cancel").status_code == 202
        rows = http.get(f"/v1/jobs/{job_id}/metrics").json()["items"]
        log = http.get(f"/v1/jobs/{job_id}/logs").text
    assert job["status"] == "running" and job["start_retries"] == 1, job
    assert f"it goes on from its checkpoint at step {step}" in log
    assert [row["step"] for row in rows] == list(range(1, len(rows) + 1))  # each step once
    assert {row["resumed_from"] for row in rows[step:]} == {step}
    again = {row["step"]: row for row in rows}
    for old in (row.as_dict() for row in lost if row.step > step):
        assert {k: again[old["step"]][k] for k in SAME} == {k: old[k] for k in SAME}, old
