"""Issue 30 items 3, 4, 5 and 11: resource fields have validated ranges and admin bounds,
one job that cannot be planned never stops the others' admission, a job that asks for
more than jobs can get is refused at once, and a job that cannot start yet does not hold
back the ones that can (backfill), without being starved itself (aging).

Ray is stubbed at the backend boundary; each request is the one the issue describes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.spec import JobSpec, TuneSpec
from service.app import create_app
from service.queue import admission
from service.queue.admission import Resources
from service.settings import Settings
from service.store import JobStore
from tests.security.conftest import ADMIN, auth
from tests.support.stub_backend import StubBackend


def job(name: str, workers: int = 1, cpus: float = 1.0, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "model": {"source": "random:tiny-digit"},
        "scaling": {"num_workers": workers, "cpus_per_worker": cpus},
        **extra,
    }


def sweep(name: str, steps: int = 20, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "base": job(name, train={"steps": steps, "eval_every": 10}),
        "space": {"bandwidth": {"kind": "uniform", "low": 0.5, "high": 4}},
        **extra,
    }


def make(tmp_path: Path, backend: StubBackend, **settings: Any) -> Iterator[TestClient]:
    config = Settings(home=tmp_path, admin_token=ADMIN, **settings)
    with TestClient(create_app(config, backend=backend, reconcile=False)) as c:
        yield c


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend(total=Resources(3.0))  # the embedded head: 3 logical CPUs


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    yield from make(tmp_path, backend)  # one CPU reserved for serving (the default)


def post(client: TestClient, spec: dict[str, Any]) -> str:
    r = client.post("/v1/tunes" if "base" in spec else "/v1/jobs", json=spec, headers=auth())
    assert r.status_code == 202, r.text
    return str(r.json()["id"])


def record(client: TestClient, job_id: str) -> dict[str, Any]:
    kind = "tunes" if job_id.startswith("tune-") else "jobs"
    found: dict[str, Any] = client.get(f"/v1/{kind}/{job_id}", headers=auth()).json()
    return found


def reconcile(client: TestClient) -> None:
    client.app.state.reconciler.run_once()  # type: ignore[attr-defined]


def jobs(client: TestClient) -> JobStore:
    found: JobStore = client.app.state.services.jobs  # type: ignore[attr-defined]
    return found


# ---- items 3, 5, 11: validated ranges and admin bounds ---------------------------------


@pytest.mark.parametrize(
    ("path", "spec", "field", "words"),
    [
        ("/v1/jobs", job("tiny", cpus=5e-324), "scaling.cpus_per_worker", "0.05"),
        ("/v1/jobs", job("four", workers=4, cpus=0.01), "scaling.cpus_per_worker", "0.05"),
        ("/v1/jobs", job("many", workers=1024, cpus=0.001), "scaling.cpus_per_worker", "0.05"),
        ("/v1/jobs", job("wide", workers=64, cpus=0.05), "scaling.num_workers", "16 workers"),
        ("/v1/jobs", job("long", train={"epochs": 1e12}), "train.epochs", "optimizer steps"),
        ("/v1/tunes", sweep("long", num_samples=1000, steps=20_000), "num_samples", "per sweep"),
    ],
    ids=["5e-324", "4x0.01", "1024x0.001", "64-workers", "epochs-1e12", "sweep-steps"],
)
def test_resource_and_length_fields_out_of_range_are_a_422_naming_the_field(
    client: TestClient, path: str, spec: dict[str, Any], field: str, words: str
) -> None:
    r = client.post(path, json=spec, headers=auth())
    assert r.status_code == 422, r.text
    assert field in r.text and words in r.text
    assert client.get(path, headers=auth()).json()["items"] == []  # nothing recorded


def test_the_memory_workers_imply_is_bounded_by_the_admin_setting(
    tmp_path: Path, backend: StubBackend
) -> None:
    for client in make(tmp_path, backend, worker_memory_mb=400, max_job_memory_mb=1000):
        r = client.post("/v1/jobs", json=job("four", workers=4, cpus=0.25), headers=auth())
        assert r.status_code == 422 and "scaling.num_workers" in r.text, r.text
        assert "1600 MB" in r.text
        # A sweep's concurrent trials each hold their own workers.
        trials = {**sweep("concurrent"), "max_concurrent_trials": 3}
        r = client.post("/v1/tunes", json=trials, headers=auth())
        assert r.status_code == 422 and "max_concurrent_trials" in r.text, r.text
        assert post(client, job("two", workers=2, cpus=0.25))  # 800 MB: within the bound


def test_a_stored_job_that_breaks_planning_is_skipped_and_the_others_are_admitted(
    client: TestClient, backend: StubBackend
) -> None:
    # Written before the range existed (or by hand): the pass must go on around it.
    bad, _ = jobs(client).create(
        kind="job", name="tiny-share", owner="admin", spec=job("tiny-share", cpus=5e-324)
    )
    good = post(client, job("good"))
    reconcile(client)
    assert backend.submitted == [good]
    refused = record(client, bad.id)
    assert refused["status"] == "failed" and refused["reason"] == "invalid_spec"


def test_an_exception_while_planning_one_job_is_surfaced_on_it_and_never_stops_the_pass(
    client: TestClient, backend: StubBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken, good = post(client, job("broken")), post(client, job("good"))
    real = admission.need

    def need(spec: JobSpec | TuneSpec) -> admission.Need:
        if spec.name == "broken":
            raise ArithmeticError("planning blew up")
        return real(spec)

    monkeypatch.setattr(admission, "need", need)
    reconcile(client)
    assert backend.submitted == [good]
    skipped = record(client, broken)
    assert skipped["status"] == "queued"
    assert "admission could not plan it: ArithmeticError: planning blew up" in (
        skipped["waiting_for"] or ""
    )
    assert client.get("/readyz", headers=auth()).status_code == 200


# ---- item 4 (and the accounting of item 0): what jobs can actually get -----------------


def test_a_job_asking_for_the_whole_cluster_is_refused_since_serving_holds_a_cpu(
    client: TestClient, backend: StubBackend
) -> None:
    whole = post(client, job("whole", workers=3, cpus=1.0))
    small = post(client, job("small"))
    reconcile(client)
    refused = record(client, whole)
    assert refused["status"] == "failed" and refused["reason"] == "does_not_fit", refused
    assert "jobs get 2 CPU of the cluster's 3 CPU (1 CPU kept for serving)" in refused["detail"]
    assert "scaling.cpus_per_worker <= 0.66 with 3 workers" in refused["detail"]
    assert backend.submitted == [small]


def test_admission_counts_the_serving_replica_before_ray_reports_it(
    client: TestClient, backend: StubBackend
) -> None:
    # Ray's last report shows all 3 CPUs free (the replica is still starting, or scales
    # up later): three one-CPU jobs must not all be handed to Ray.
    ids = [post(client, job(f"j{i}")) for i in range(3)]
    reconcile(client)
    assert backend.submitted == ids[:2]
    assert record(client, ids[2])["waiting_for"] == "resources: needs 1 CPU, 0 CPU free of 2 CPU"


def test_a_job_that_cannot_start_yet_lets_smaller_ones_start_until_it_has_aged(
    tmp_path: Path,
) -> None:
    backend = StubBackend(total=Resources(4.0))
    for client in make(tmp_path, backend, reserved_cpus=1.0, queue_aging_s=3600):
        holder = post(client, job("holder", workers=2))  # 2 of the 3 CPUs jobs get
        reconcile(client)
        big = post(client, job("big", workers=3))  # needs all 3: waits for the holder
        small = post(client, job("small"))  # fits the CPU left: starts meanwhile
        reconcile(client)
        assert backend.submitted == [holder, small]
        waiting = record(client, big)
        assert waiting["status"] == "queued" and waiting["queue_position"] == 1
    # Once it has waited past the aging limit, nothing behind it starts before it.
    aged = StubBackend(total=Resources(4.0))
    for client in make(tmp_path / "aged", aged, reserved_cpus=1.0, queue_aging_s=0):
        holder = post(client, job("holder", workers=2))
        reconcile(client)
        big, small = post(client, job("big", workers=3)), post(client, job("small"))
        reconcile(client)
        assert aged.submitted == [holder]
        assert big in record(client, small)["waiting_for"]
        aged.statuses[holder] = "STOPPED"
        reconcile(client)
        assert aged.submitted == [holder, big]
