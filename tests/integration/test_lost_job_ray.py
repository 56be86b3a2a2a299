"""A job Ray loses with its head part-way through goes on from its latest checkpoint, on the
real local Ray: Ray Train's own checkpoint record says from which step, the metrics the lost
attempt wrote past it are cut, and the resumed attempt writes those steps again with the same
numbers (its checkpoint carries the random state). Ray "loses" the job as a new head would
show it: the job is stopped, then its record deleted, so that Ray answers 404 for its id. The
reconciler's passes are run by hand, so none of them sees the job between the two."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from ray.job_submission import JobSubmissionClient

from jobs.records.models import RESULT, MetricsRow
from jobs.records.restore import restore_step
from jobs.records.run_files import RunFiles
from service.app import create_app
from tests.support.api import ADMIN, auth
from tests.support.reconciling import ray_settings, reconcile, record

pytestmark = pytest.mark.ray
H = auth(ADMIN)
STEPS = 80  # ~0.1-0.2 s a step here: the lost attempt is caught well before its end
SPEC: dict[str, Any] = {
    "name": "lost",
    "model": {"source": "random:tiny-digit", "use_chat_template": False},
    "data": {"task": "arithmetic", "train_size": 128, "eval_size": 4, "max_length": 96},
    "loss": {"name": "smmd"},
    "train": {"steps": STEPS, "batch_size": 4, "lr": 0.003, "eval_max_new_tokens": 4,
              "eval_every": 10, "checkpoint_every": 10, "seed": 5},
    "max_failures": 0,
}  # fmt: skip
SAME = ("loss", "ce", "smmd", "lr", "grad_norm")  # what a resumed step must repeat exactly


@pytest.fixture
def client(ray_cluster: str, tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(ray_settings(tmp_path, ray_cluster), reconcile=False)) as c:
        yield c


def passes_until(client: TestClient, done: Any, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"never {what}"
        reconcile(client)
        time.sleep(0.2)


def checkpointed_and_past(run: RunFiles) -> bool:
    """Ray has recorded a checkpoint, and the run has written a step past it."""
    try:
        step = restore_step(run)
    except ValueError:  # Ray is writing its record just now
        return False
    return step > 0 and any(row.step > step for row in run.read_metrics())


def lose(ray_cluster: str, ray_id: str, run: RunFiles) -> list[MetricsRow]:
    """Stop the Ray job, wait for its processes to stop writing, delete Ray's record of it;
    return the metrics the lost attempt wrote."""
    ray = JobSubmissionClient(ray_cluster)
    ray.stop_job(ray_id)
    deadline = time.monotonic() + 60
    while str(ray.get_job_status(ray_id)) not in ("STOPPED", "JobStatus.STOPPED"):
        assert time.monotonic() < deadline, ray.get_job_status(ray_id)
        time.sleep(0.2)
    rows, quiet_since = run.read_metrics(), time.monotonic()
    while time.monotonic() - quiet_since < 3:  # its workers end after the driver
        time.sleep(0.5)
        if len(now := run.read_metrics()) != len(rows):
            rows, quiet_since = now, time.monotonic()
    assert ray.delete_job(ray_id)
    return rows


def test_a_job_lost_part_way_goes_on_from_its_checkpoint_to_the_same_numbers(
    client: TestClient, ray_cluster: str
) -> None:
    job_id = str(client.post("/v1/jobs", json=SPEC, headers=H).json()["id"])
    storage = client.app.state.services.settings.storage_root  # type: ignore[attr-defined]
    run = RunFiles.for_job(job_id, storage)
    passes_until(client, lambda: checkpointed_and_past(run), "checkpointed")
    lost_rows = lose(ray_cluster, job_id, run)
    assert not run.has(RESULT), "the stopped attempt wrote a result: not a lost run"
    step = restore_step(run)
    assert 0 < step < lost_rows[-1].step < STEPS, (step, lost_rows[-1])

    reconcile(client)  # Ray answers 404: back in the queue, its metrics cut to `step`
    back = record(client, job_id)
    assert back["status"] in ("queued", "submitted") and back["start_retries"] == 1, back
    assert f"it goes on from its checkpoint at step {step}" in back["detail"]
    assert [row.step for row in run.read_metrics()] == list(range(1, step + 1))

    passes_until(client, lambda: record(client, job_id)["status"] == "succeeded", "succeeded")
    copied = client.get(f"/v1/jobs/{job_id}/metrics", headers=H).json()["items"]
    assert [row["step"] for row in copied] == list(range(1, STEPS + 1))  # each step once
    assert {row["resumed_from"] for row in copied[step:]} == {step}
    assert {row["resumed_from"] for row in copied[:step]} == {0}
    # The steps the lost attempt had run past its checkpoint, run again: the same numbers.
    again = {row["step"]: row for row in copied}
    for old in (row.as_dict() for row in lost_rows if row.step > step):
        assert {k: again[old["step"]][k] for k in SAME} == {k: old[k] for k in SAME}, old
    log = client.get(f"/v1/jobs/{job_id}/logs", headers=H).text
    assert f"it goes on from its checkpoint at step {step}" in log
