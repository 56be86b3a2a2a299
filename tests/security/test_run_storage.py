"""Issue 45 item 14 (N12): DELETE /v1/jobs/{id} removes the job's run folder (checkpoints:
MBs even for a tiny model) unless a study still names the job, and run folders count against
their owner's storage quota beside uploaded files: an upload past it, or a submit once it is
full, is a 413 quota_exceeded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.security.conftest import ADMIN, auth
from tests.support.files import ROW, upload
from tests.support.registry import finished_job
from tests.support.stub_backend import StubBackend
from tests.support.studies import bare_study
from tests.unit.api_cases import GOOD


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_deleting_a_job_deletes_its_run_folder_unless_a_study_names_it(
    client: TestClient, tmp_path: Path
) -> None:
    job, ckpt = finished_job(client)
    run = ckpt.parent.parent
    assert folder_bytes(run) > 100_000  # the checkpoint's weights
    assert client.delete(f"/v1/jobs/{job.id}", headers=auth()).status_code == 204
    assert not run.exists()
    # A study's run: its folder is the study's too (its result and per-run view read it).
    created = client.post("/v1/studies", json=bare_study(), headers=auth())
    assert created.status_code == 202, created.text
    job_id = created.json()["runs"][0]["job_id"]
    services = client.app.state.services  # type: ignore[attr-defined]
    assert services.jobs.transition(job_id, "queued", "cancelled")
    kept = tmp_path / "storage" / "runs" / job_id
    kept.mkdir(parents=True)
    (kept / "result.json").write_text("{}")
    assert client.delete(f"/v1/jobs/{job_id}", headers=auth()).status_code == 204
    assert (kept / "result.json").exists()


@pytest.fixture
def small_quota(tmp_path: Path) -> Iterator[TestClient]:
    """A quota a little above one tiny job's run folder (measured below)."""
    settings = Settings(
        home=tmp_path, admin_token=ADMIN, storage=str(tmp_path / "storage"),
        owner_quota_bytes=20_000_000,
    )  # fmt: skip
    with TestClient(create_app(settings, backend=StubBackend(), reconcile=False)) as c:
        yield c


def test_run_folders_count_against_the_owners_quota(small_quota: TestClient) -> None:
    client = small_quota
    rows = ((json.dumps(ROW) + "\n") * 40).encode()
    assert upload(client, ADMIN, rows, "fine-tune", "a.jsonl").status_code == 201
    job, ckpt = finished_job(client)
    used = folder_bytes(ckpt.parent.parent)
    assert 10_000_000 < used < 20_000_000  # one tiny job's folder (16 MB): most of the quota
    big = b"".join([rows] * (1 + (20_000_000 - used) // len(rows)))
    r: Any = upload(client, ADMIN, big, "fine-tune", "b.jsonl")  # fits the quota without runs
    assert r.status_code == 413 and r.json()["error"] == "quota_exceeded", r.text
    assert "run folders" in r.text
    job2, _ = finished_job(client)  # a second run folder: now past the quota
    r = client.post("/v1/jobs", json=GOOD, headers=auth())
    assert r.status_code == 413 and r.json()["error"] == "quota_exceeded", r.text
    for done in (job, job2):
        assert client.delete(f"/v1/jobs/{done.id}", headers=auth()).status_code == 204
    assert upload(client, ADMIN, big, "fine-tune", "b.jsonl").status_code == 201
    assert client.post("/v1/jobs", json=GOOD, headers=auth()).status_code == 202
