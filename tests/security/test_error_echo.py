"""Issue 45 item 16 (N14): a 404 echoes what was asked for within bounds (a 10,000-character
id was sent back whole, on the API and on serving), and a GPU job that does not fit is
told which resource does not fit (it was told to change its CPUs)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from starlette.requests import Request

from service.queue.admission import Resources
from service.registry import ModelNotFound
from service.serving.deployment import _model_error
from tests.support.admission import H, job, make_client, post, reconcile, record
from tests.support.stub_backend import StubBackend

LONG = "a" * 10_000


def test_a_404_echoes_a_bounded_id(tmp_path: Path) -> None:
    for client in make_client(tmp_path, StubBackend(total=Resources(3.0))):
        for path in (f"/v1/jobs/{LONG}", f"/v1/tunes/{LONG}", f"/v1/studies/{LONG}"):
            r = client.get(path, headers=H)
            assert r.status_code == 404, (path, r.status_code)
            assert len(r.content) < 300 and "(10000 characters)" in r.json()["detail"], r.text
        short = client.get("/v1/jobs/job-nope", headers=H).json()["detail"]
        assert short == "no job 'job-nope'"  # short ids are echoed whole


def test_servings_404_echoes_a_bounded_reference() -> None:
    scope = {"type": "http", "method": "GET", "path": f"/v1/models/{LONG}", "headers": []}
    response = asyncio.run(_model_error(Request(scope), ModelNotFound(f"no model {LONG!r}")))
    assert response.status_code == 404 and len(response.body) < 300
    assert "(10000 characters)" in json.dumps(json.loads(bytes(response.body)))


@pytest.mark.parametrize(
    ("total", "workers", "says"),
    [
        (Resources(3.0), 1, "GPU: none here for jobs; scaling.use_gpu false, or a cluster with"),
        (Resources(3.0, 1.0), 2, "GPU: scaling.num_workers <= 1 (1 GPU each)"),
    ],
)
def test_a_gpu_job_that_does_not_fit_is_told_about_gpus(
    tmp_path: Path, total: Resources, workers: int, says: str
) -> None:
    for client in make_client(tmp_path, StubBackend(total=total)):
        spec = job("gpu", workers=workers)
        spec["scaling"]["use_gpu"] = True  # one GPU per worker
        gpu_job = post(client, spec)
        reconcile(client)
        done = record(client, gpu_job)
        assert done["status"] == "failed" and done["reason"] == "does_not_fit", done
        assert says in done["detail"] and "cpus_per_worker" not in done["detail"], done["detail"]
