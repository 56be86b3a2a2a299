"""Issue 45 item 5 (N7): by default, while another owner's job waits, one owner's jobs do
not take every CPU: the queue keeps a share (NUMTUNE_OWNER_SHARE, half) for the others.
Through the API and the reconciler's admission pass, with Ray stubbed at the backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.queue.admission import Resources
from tests.support.admission import job, make_client, post, reconcile, record, token
from tests.support.stub_backend import StubBackend

LONG = {"train": {"steps": 1_000_000}}  # the 1M-step jobs (3.5 days at 0.3 s a step)


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend(total=Resources(2.0))  # the 2-CPU machine


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    yield from make_client(tmp_path, backend)


def test_one_owner_keeps_a_share_for_another_owner_waiting(
    client: TestClient, backend: StubBackend
) -> None:
    ann, bob = token(client, "ann"), token(client, "bob")
    first = post(client, job("ann-1", workers=1) | LONG, ann)
    reconcile(client)
    assert backend.submitted == [first]  # alone: ann's first job starts
    second = post(client, job("ann-2", workers=1) | LONG, ann)  # older than bob's
    tiny = post(client, job("bob-tiny", workers=1) | {"train": {"steps": 10}}, bob)
    reconcile(client)
    # Before: ann's second job took the last CPU (it came first) and bob's waited for days.
    assert backend.submitted == [first, tiny]
    waiting = record(client, second)
    assert waiting["status"] == "queued"
    assert waiting["waiting_for"].startswith("owner share: ann's jobs hold 1 CPU of 2 CPU")
    # Nobody else waits: the free CPU is ann's again once bob's job has started and ended.
    backend.statuses[tiny] = "SUCCEEDED"
    reconcile(client)
    reconcile(client)
    assert backend.submitted == [first, tiny, second]


def test_an_owner_alone_uses_the_whole_cluster(client: TestClient, backend: StubBackend) -> None:
    ann = token(client, "ann")
    ids = [post(client, job(f"ann-{i}", workers=1), ann) for i in range(2)]
    reconcile(client)
    assert backend.submitted == ids
