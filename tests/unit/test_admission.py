"""Admission (issue 13 item 0, issue 14 item 8): jobs queue instead of failing, in fair
order, and say why they wait; a job bigger than the cluster fails at once; ceilings.

Ray is stubbed at the backend boundary (its capacity included); the e2e test
`tests/e2e/test_pause_e2e.py` runs the same path against a real Ray head (2-CPU jobs taking
turns, a job too big refused at once)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.jobs.logstream import follow_log
from service.queue.admission import Resources
from tests.support.admission import H, job, make_client, post, reconcile, record, sweep, token
from tests.support.stub_backend import StubBackend


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend(total=Resources(3.0))  # the embedded head: 3 logical CPUs


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    yield from make_client(tmp_path, backend)


def test_jobs_that_fit_one_at_a_time_wait_in_order_and_each_starts_when_one_ends(
    client: TestClient, backend: StubBackend
) -> None:
    ids = [post(client, job(f"j{i}")) for i in range(3)]  # 2 CPUs each; the cluster has 3
    reconcile(client)
    assert backend.submitted == ids[:1]
    waiting = [record(client, i) for i in ids[1:]]
    assert [j["status"] for j in waiting] == ["queued", "queued"]
    assert [j["queue_position"] for j in waiting] == [1, 2]
    assert waiting[0]["waiting_for"] == "resources: needs 2 CPU, 1 CPU free of 3 CPU"
    assert waiting[1]["waiting_for"] == "resources: needs 2 CPU, 1 CPU free of 3 CPU"
    for turn in (1, 2):
        backend.statuses[ids[turn - 1]] = "STOPPED"  # the running one ends
        reconcile(client)
        assert backend.submitted == ids[: turn + 1]
        started = record(client, ids[turn])
        assert started["status"] == "submitted" and started["waiting_for"] is None
    assert all(record(client, i)["status"] != "failed" for i in ids)


def test_a_job_bigger_than_the_cluster_fails_at_once_saying_what_fits(
    client: TestClient, backend: StubBackend
) -> None:
    big = post(client, job("big", workers=2, cpus=2.0))
    small = post(client, job("small", workers=1, cpus=1.0))
    reconcile(client)
    done = record(client, big)
    assert done["status"] == "failed" and done["reason"] == "does_not_fit"
    assert "need 4 CPU but the whole cluster has 3 CPU" in done["detail"]
    assert "scaling.cpus_per_worker <= 1.50 with 2 workers" in done["detail"]
    assert backend.submitted == [small]  # the refused one blocks nobody


def test_a_sweep_queues_and_one_bigger_than_the_cluster_fails_at_once(
    client: TestClient, backend: StubBackend
) -> None:
    running = post(client, job("holder"))  # 2 of the 3 CPUs
    reconcile(client)
    fits = post(client, sweep("fits", cpus=1.5))
    never = post(client, sweep("never", cpus=3.0))
    reconcile(client)
    assert backend.submitted == [running]
    assert record(client, fits)["status"] == "queued"
    assert "needs 1.51 CPU" in record(client, fits)["waiting_for"]
    refused = record(client, never)
    assert refused["status"] == "failed" and refused["reason"] == "does_not_fit"
    assert "base.scaling.cpus_per_worker <= 2.99 with 1 workers" in refused["detail"]
    backend.statuses[running] = "STOPPED"
    reconcile(client)
    assert backend.submitted == [running, fits]


def test_owners_take_turns(client: TestClient, backend: StubBackend) -> None:
    ann, bob = token(client, "ann"), token(client, "bob")
    anns = [post(client, job(f"a{i}"), ann) for i in range(3)]
    bobs = [post(client, job("b0"), bob)]
    reconcile(client)
    assert backend.submitted == anns[:1]
    # Bob's first job goes before Ann's second, though submitted after it.
    assert record(client, bobs[0])["queue_position"] == 1
    assert [record(client, i)["queue_position"] for i in anns[1:]] == [2, 3]
    backend.statuses[anns[0]] = "STOPPED"
    reconcile(client)
    assert backend.submitted == [anns[0], bobs[0]]


def test_the_per_owner_limit_holds_only_that_owner(tmp_path: Path) -> None:
    backend = StubBackend(total=Resources(16.0))
    for client in make_client(tmp_path, backend, max_running_per_owner=1):
        ann, bob = token(client, "ann"), token(client, "bob")
        first, second = post(client, job("a0"), ann), post(client, job("a1"), ann)
        other = post(client, job("b0"), bob)
        reconcile(client)
        assert backend.submitted == [first, other]
        held = record(client, second)
        assert held["status"] == "queued"
        assert held["waiting_for"] == "owner limit: 1 of ann's jobs running (limit 1)"


def test_queued_jobs_wait_while_ray_is_down_and_go_when_it_is_back(
    client: TestClient, backend: StubBackend
) -> None:
    backend.reachable = False
    queued = post(client, job("q"))
    for _ in range(3):
        reconcile(client)
    seen = record(client, queued)
    assert seen["status"] == "queued" and "unreachable" in seen["waiting_for"]
    backend.reachable = True
    reconcile(client)
    assert backend.submitted == [queued]


def test_the_follow_stream_says_where_a_queued_job_waits(
    client: TestClient, backend: StubBackend
) -> None:
    post(client, job("first"))
    reconcile(client)
    second = post(client, job("second"))
    reconcile(client)
    client.post(f"/v1/jobs/{second}/cancel", headers=H)  # so that the stream ends
    with client.stream("GET", f"/v1/jobs/{second}/logs?follow=true", headers=H) as r:
        text = "".join(r.iter_text())
    # Cancelled before the stream started: only the end; the queued case is below.
    assert "event: end" in text
    third = post(client, job("third"))
    reconcile(client)
    store = client.app.state.services.jobs  # type: ignore[attr-defined]
    events: list[str] = []

    async def collect() -> None:
        # max_s only turns a missing `queued` event into a failure instead of a hang.
        async for event in follow_log(store, third, 0.01, max_s=60):
            events.append(event)
            if event.startswith("event: queued"):
                store.transition(third, "queued", "cancelled")

    import asyncio

    asyncio.run(collect())
    assert events[0].startswith("event: queued")
    assert '"position": 1' in events[0] and "resources: needs 2 CPU" in events[0]
    assert events[-1].startswith("event: end")


# ---- ceilings (issue 14 item 8) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "spec", "field"),
    [
        ("/v1/jobs", job("long", train={"steps": 10**15}), "train.steps"),
        ("/v1/jobs", job("slow", timeout_s=10**9), "timeout_s"),
        ("/v1/tunes", sweep("slow", 1.0, timeout_s=10**9), "timeout_s"),
        ("/v1/tunes", sweep("wide", 1.0, num_samples=10_000), "num_samples"),
        (
            "/v1/tunes",
            {
                **sweep("grid", 1.0, num_samples=10_000),
                "space": {"bandwidth": {"kind": "grid", "values": [1, 2, 3]}},
            },
            "num_samples",
        ),
    ],
    ids=["steps", "timeout", "sweep-timeout", "trials", "grid-trials"],
)
def test_specs_beyond_the_ceilings_are_a_422_naming_the_field(
    tmp_path: Path, backend: StubBackend, path: str, spec: dict[str, Any], field: str
) -> None:
    for client in make_client(tmp_path, backend, max_steps=10_000, max_trials=100):
        r = client.post(path, json=spec, headers=H)
        assert r.status_code == 422, r.text
        assert field in r.text
        assert client.get(path, headers=H).json()["items"] == []  # nothing recorded
