"""Registry: auto-registration of a real checkpoint folder, checksums, aliases,
confinement of registration requests to the job's run folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.registry import ArtifactError
from tests.support.registry import auth, client, finished_job

__all__ = ["client"]  # the fixture, from the support package


def test_auto_registration_copies_hashes_and_serves_verified(client: TestClient) -> None:
    job, ckpt = finished_job(client)
    registry = client.app.state.services.registry  # type: ignore[attr-defined]
    row = registry.register_job(job)
    assert (row.name, row.version) == ("arith", 1)
    assert "model.safetensors" in row.files and "spec.json" in row.files
    assert "trainer_state.pt" not in row.files  # pickles are never registered
    assert registry.register_job(job).version == 1  # same checkpoint: no second version
    info = client.get("/v1/models/arith/versions/1", headers=auth()).json()
    assert info["job_id"] == job.id and info["dataset"]["task"] == "arithmetic"
    assert info["metrics"]["eval_mae"] == 3.0 and info["spec"]["loss"]["name"] == "smmd"
    with registry.verified_copy(registry.resolve("arith:1")) as folder:
        assert sorted(p.name for p in folder.iterdir()) == sorted(row.files)
    # The original may go (Ray's top-k deletes it): the version does not.
    for f in ckpt.iterdir():
        f.unlink()
    with registry.verified_copy(registry.resolve("arith")) as folder:
        assert (folder / "model.safetensors").is_file()


def test_one_changed_byte_is_refused(client: TestClient) -> None:
    job, _ = finished_job(client)
    registry = client.app.state.services.registry  # type: ignore[attr-defined]
    registry.register_job(job)
    weights = Path(registry.storage_uri) / "registry" / "arith" / "v1" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    with (
        pytest.raises(ArtifactError, match=r"model\.safetensors fails its sha256 check"),
        registry.verified_copy(registry.resolve("arith:1")),
    ):
        pass


def test_aliases_point_and_protect_versions(client: TestClient) -> None:
    job, _ = finished_job(client)
    second, _ = finished_job(client)
    registry = client.app.state.services.registry  # type: ignore[attr-defined]
    registry.register_job(job)
    registry.register_job(second)
    r = client.put("/v1/models/arith/aliases/production", json={"version": 1}, headers=auth())
    assert r.status_code == 200 and r.json()["aliases"] == {"production": 1}
    assert registry.resolve("arith@production").version == 1
    assert registry.resolve("arith").version == 2
    r = client.delete("/v1/models/arith/versions/1", headers=auth())
    assert r.status_code == 409 and "production" in r.json()["detail"]
    client.put("/v1/models/arith/aliases/production", json={"version": 2}, headers=auth())
    assert client.delete("/v1/models/arith/versions/1", headers=auth()).status_code == 204
    assert client.get("/v1/models/arith/versions/1", headers=auth()).status_code == 404
    bad = client.put("/v1/models/arith/aliases/production", json={"version": 9}, headers=auth())
    assert bad.status_code == 422 and "version" in bad.text


@pytest.mark.parametrize(
    "checkpoint",
    [
        "../../etc",
        "train/../../other-job/train/checkpoint_000001",
        "/etc",
        "file:///etc",
        "link-out",
    ],
)
def test_registration_outside_the_run_folder_is_a_4xx(client: TestClient, checkpoint: str) -> None:
    job, ckpt = finished_job(client)
    (ckpt.parents[1] / "link-out").symlink_to("/etc", target_is_directory=True)
    r = client.post(
        "/v1/models/stolen/versions",
        json={"job_id": job.id, "checkpoint": checkpoint},
        headers=auth(),
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_request" and "checkpoint" in r.text
    assert client.get("/v1/models/stolen", headers=auth()).status_code == 404


def test_manual_registration_and_owner_isolation(client: TestClient) -> None:
    job, _ = finished_job(client, owner="ann")
    r = client.post(
        "/v1/models/mine/versions",
        json={"job_id": job.id, "checkpoint": "train/checkpoint_000001"},
        headers=auth(),
    )
    assert r.status_code == 201 and r.json()["ref"] == "mine:1"
    token = client.post("/v1/tokens", json={"owner": "bob", "scopes": ["submit"]}, headers=auth())
    bob = token.json()["token"]
    assert client.get("/v1/models/mine", headers=auth(bob)).status_code == 404
    assert client.get("/v1/models", headers=auth(bob)).json() == []
