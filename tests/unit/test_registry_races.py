"""Issue 13 items 11 and 12: registration is idempotent under concurrency, a version is
visible only complete, numbers are never reused, aliases only point at live versions."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.registry import Registry
from service.store.models import VersionMissingError
from tests.support.registry import auth, client, finished_job

__all__ = ["client"]  # the fixture, from the support package


def registry_of(client: TestClient) -> Registry:
    found: Registry = client.app.state.services.registry  # type: ignore[attr-defined]
    return found


def together(registry: Registry, monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Make n registrations reach the point after copying their files at the same time."""
    barrier = threading.Barrier(n, timeout=60)
    copy = registry.files.copy

    def copy_then_wait(src: str, dest: str) -> dict[str, str]:
        files = copy(src, dest)
        barrier.wait()
        return files

    monkeypatch.setattr(registry.files, "copy", copy_then_wait)


def run_all(calls: list[Any]) -> list[Any]:
    """Run the calls in threads at once; each one's result, or the exception it raised."""
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
    return [f.exception() or f.result() for f in futures]


def staging_left(client: TestClient) -> list[Path]:
    root = Path(client.app.state.services.settings.storage_root) / "registry" / ".staging"  # type: ignore[attr-defined]
    return list(root.iterdir()) if root.exists() else []


def test_registering_one_job_twice_at_once_makes_one_complete_version(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, _ = finished_job(client)
    registry = registry_of(client)
    together(registry, monkeypatch, 3)
    rows = run_all([lambda: registry.register_job(job)] * 3)
    assert not [r for r in rows if isinstance(r, Exception)], rows
    versions = registry.store.versions("arith")
    assert len(versions) == 1  # the losers' numbers stay unused (never handed out again)
    assert {(r.name, r.version) for r in rows} == {("arith", versions[0].version)}
    with registry.verified_copy(registry.resolve("arith")) as folder:  # every sha256 checks out
        assert sorted(p.name for p in folder.iterdir()) == sorted(versions[0].files)
    published = Path(registry.storage_uri) / "registry" / "arith"
    assert [p.name for p in published.iterdir()] == [f"v{versions[0].version}"]  # no other
    assert staging_left(client) == []


def test_two_first_registrations_of_a_new_name_both_get_a_version(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = [finished_job(client)[0] for _ in range(3)]
    registry = registry_of(client)
    together(registry, monkeypatch, 3)
    rows = run_all(
        [lambda j=j: registry.register(name="fresh", owner="admin", job=j) for j in jobs]
    )
    assert not [r for r in rows if isinstance(r, Exception)], rows
    assert sorted(r.version for r in rows) == [1, 2, 3]
    assert client.get("/v1/models/fresh", headers=auth()).status_code == 200


def test_a_failed_publish_leaves_no_version_and_no_folder(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, _ = finished_job(client)
    registry = registry_of(client)

    def full_disk(staging: str, final: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(registry.files, "publish", full_disk)
    with pytest.raises(OSError, match="No space left"):
        registry.register_job(job)
    assert registry.store.versions("arith") == []
    assert staging_left(client) == []
    monkeypatch.undo()
    row = registry.register_job(job)  # tried again: a whole version
    with registry.verified_copy(registry.resolve(f"arith:{row.version}")) as folder:
        assert sorted(p.name for p in folder.iterdir()) == sorted(row.files)


def test_version_numbers_are_never_reused_and_aliases_only_point_at_live_versions(
    client: TestClient,
) -> None:
    registry = registry_of(client)
    for _ in range(2):
        registry.register_job(finished_job(client)[0])
    assert (
        client.put(
            "/v1/models/arith/aliases/production", json={"version": 2}, headers=auth()
        ).status_code
        == 200
    )
    assert client.delete("/v1/models/arith/versions/2", headers=auth()).status_code == 409
    assert client.delete("/v1/models/arith/aliases/production", headers=auth()).status_code == 204
    assert client.delete("/v1/models/arith/versions/2", headers=auth()).status_code == 204
    again = registry.register_job(finished_job(client)[0])
    assert again.version == 3  # not 2 again, with other bytes
    assert registry.store.aliases("arith") == {}
    # An alias set onto a version that is gone (deleted between a check and the write):
    # the database refuses it in the same transaction.
    with pytest.raises(VersionMissingError):
        registry.store.set_alias("arith", "production", 2)
    r = client.put("/v1/models/arith/aliases/production", json={"version": 2}, headers=auth())
    assert r.status_code == 422 and "version" in r.text
