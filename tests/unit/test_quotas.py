"""Compute quotas (issue 47 item 3): an owner over quota waits with a reason and nothing
fails; the job starts once the usage leaves the rolling window; usage is CPUs held × time
running, readable by its owner and the admin (GET /v1/usage), not by another owner.

Ray is stubbed at the backend boundary; the store is real SQLite; time is moved by
rewriting the rows' started/finished stamps, as the clock would have."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.spec import JobSpec
from service.queue import admission
from service.queue.admission import Capacity, Policy, Resources, plan
from service.queue.quotas import QuotaLimit, Quotas, Usage, groups_by_owner
from service.queue.usage import job_usage
from service.settings import Settings
from service.store.job_rows import new_job
from tests.support.admission import H, job, make_client, post, reconcile, record, token
from tests.support.stub_backend import StubBackend

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def row(owner: str, cpus: float = 1.0, **stamps: datetime) -> Any:
    spec = JobSpec.model_validate(job(f"{owner}-j", workers=1, cpus=cpus))
    made = new_job(kind="job", name=spec.name, owner=owner, spec=spec)
    for name, value in stamps.items():
        setattr(made, name, value)
    return made


def test_usage_is_cpus_held_times_running_time_inside_the_window() -> None:
    ran = row(
        "a", cpus=2.0, started_at=NOW - timedelta(hours=2), finished_at=NOW - timedelta(minutes=30)
    )
    inside = job_usage(ran, NOW - timedelta(hours=1), NOW, None)
    assert inside.seconds == 1800 and inside.usage == Usage(3600.0, 0.0)  # 2 CPU × 30 min
    running = row("a", cpus=0.5, started_at=NOW - timedelta(minutes=10))
    assert job_usage(running, NOW - timedelta(hours=1), NOW, None).usage.cpu_seconds == 300.0


def test_an_owner_over_quota_waits_with_why_others_start_and_nothing_fails() -> None:
    quotas = Quotas(window_s=3600, default=QuotaLimit(cpu_seconds=1000))
    queued = [row("alice"), row("bob")]
    decisions = plan(
        queued, [], Capacity(Resources(4.0), Resources(4.0)), served=Counter(),
        policy=Policy(quotas=quotas), usage={"alice": Usage(1500.0)},
    )  # fmt: skip
    by_owner = {d.job.owner: d for d in decisions}
    assert by_owner["bob"].action == "submit"
    held = by_owner["alice"]
    assert held.action == "wait" and held.position == 1
    assert held.why == (
        "quota: alice used 1,500 CPU-seconds of 1,000 in the last 1 h; "
        "it starts as that usage leaves the window"
    )
    # The same pass with alice's usage out of the window: she starts.
    again = plan(
        queued, [], Capacity(Resources(4.0), Resources(4.0)), served=Counter(),
        policy=Policy(quotas=quotas), usage={"alice": Usage(400.0)},
    )  # fmt: skip
    assert [d.action for d in again] == ["submit", "submit"]


def test_a_group_shares_one_quota_and_its_own_limit_overrides_the_default() -> None:
    quotas = Quotas(
        window_s=3600,
        default=QuotaLimit(cpu_seconds=100),
        limits={"team-a": QuotaLimit(cpu_seconds=5000)},
        groups=groups_by_owner({"team-a": ["alice", "carol"]}),
    )
    assert quotas.account("carol") == "team-a" and quotas.account("bob") == "bob"
    assert quotas.over("carol", Usage(4000.0)) is None  # the group's limit, not the default
    why = quotas.over("carol", Usage(5000.0))
    assert why is not None and why.startswith("quota: group team-a (of carol) used 5,000")
    assert quotas.over("bob", Usage(0.0, 0.0)) is None and quotas.over("bob", Usage(100.0))
    with pytest.raises(ValueError, match="in two groups"):
        groups_by_owner({"x": ["alice"], "y": ["alice"]})


def test_settings_read_quotas_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMTUNE_QUOTA_CPU_SECONDS", "7200")
    monkeypatch.setenv("NUMTUNE_QUOTA_GROUPS", '{"team-a": ["alice", "bob"]}')
    monkeypatch.setenv("NUMTUNE_QUOTA_LIMITS", '{"team-a": {"gpu_seconds": 60}}')
    quotas = Settings().quotas
    assert quotas.default.cpu_seconds == 7200 and quotas.account("bob") == "team-a"
    assert quotas.limit("team-a").gpu_seconds == 60 and quotas.bounded
    monkeypatch.setenv("NUMTUNE_QUOTA_LIMITS", '{"team-a": {"cpu_secs": 60}}')
    with pytest.raises(ValueError, match="cpu_secs"):
        Settings()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    backend = StubBackend(total=Resources(3.0))
    yield from make_client(tmp_path, backend, quota_window_s=3600, quota_cpu_seconds=1000)


def shift(client: TestClient, job_id: str, **ago_s: float) -> None:
    """Set the job's stamps to so many seconds ago (the clock having moved on)."""
    jobs = client.app.state.services.jobs  # type: ignore[attr-defined]
    now = datetime.now(UTC)
    jobs.set_fields(job_id, **{k: now - timedelta(seconds=v) for k, v in ago_s.items()})


def test_over_quota_waits_then_starts_once_usage_leaves_the_window(client: TestClient) -> None:
    backend = client.app.state.services.backend  # type: ignore[attr-defined]
    alice, bob = token(client, "alice"), token(client, "bob")
    first = post(client, job("a1", workers=2), alice)  # 2 CPU
    reconcile(client)
    reconcile(client)  # Ray says RUNNING: it runs
    assert record(client, first)["status"] == "running"
    backend.statuses[first] = "STOPPED"
    reconcile(client)  # it ended; it had run 10 minutes: 2 CPU × 600 s = 1,200 CPU-s
    shift(client, first, started_at=900, finished_at=300)
    second, other = (
        post(client, job("a2", workers=1), alice),
        post(client, job("b1", workers=1), bob),
    )
    reconcile(client)
    waiting = record(client, second)
    assert waiting["status"] == "queued" and waiting["queue_position"] == 1
    assert waiting["waiting_for"].startswith("quota: alice used 1,200 CPU-seconds of 1,000")
    assert record(client, other)["status"] == "submitted"  # bob is not held by alice's quota
    reconcile(client)  # bob's runs (alice's still waits)
    assert record(client, second)["waiting_for"].startswith("quota: alice")

    mine = client.get("/v1/usage", headers=alice).json()
    assert [a["account"] for a in mine["accounts"]] == ["alice"]
    assert mine["accounts"][0]["cpu_seconds"] == pytest.approx(1200, abs=5)
    assert mine["accounts"][0]["over_quota"] is True
    assert mine["accounts"][0]["cpu_seconds_limit"] == 1000
    (ran,) = mine["jobs"]
    assert ran["id"] == first and ran["cpus"] == 2.0 and ran["seconds"] == pytest.approx(600, abs=3)
    refused = client.get("/v1/usage", params={"owner": "alice"}, headers=bob)
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    assert all(j["owner"] == "bob" for j in client.get("/v1/usage", headers=bob).json()["jobs"])
    admin = client.get("/v1/usage", params={"owner": "alice"}, headers=H).json()
    assert [j["id"] for j in admin["jobs"]] == [first]
    everyone = client.get("/v1/usage", headers=H).json()
    assert {a["account"] for a in everyone["accounts"]} == {"alice", "bob"}

    admission._NEEDS.clear()  # as in a fresh process: each spec is read from the store once
    again = client.get("/v1/usage", params={"owner": "alice"}, headers=H).json()
    assert again["jobs"] == admin["jobs"]

    shift(client, first, started_at=3600 + 900, finished_at=3600 + 300)  # an hour later
    reconcile(client)
    assert record(client, second)["status"] == "submitted"
    assert all(record(client, i)["status"] != "failed" for i in (first, second, other))
