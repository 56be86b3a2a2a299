"""Issue 14 item 17: no symlink enters the registry; serving loads only a version's listed
files, and exactly the bytes whose sha256 it checked."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from jobs.infer import NumericPredictor
from service.registry import ArtifactError
from tests.security.conftest import auth
from tests.support.registry import finished_job


def test_a_symlinked_folder_inside_a_checkpoint_is_refused(
    client: TestClient, tmp_path: Path
) -> None:
    job, ckpt = finished_job(client)
    secrets_dir = tmp_path / "host-secrets"
    secrets_dir.mkdir()
    (secrets_dir / "id_rsa").write_text("PRIVATE KEY")
    (ckpt / "extra").symlink_to(secrets_dir, target_is_directory=True)
    r = client.post("/v1/models/leak/versions", json={"job_id": job.id}, headers=auth())
    assert r.status_code == 422 and "symlinks are not registered" in r.text, r.text
    assert not (tmp_path / "storage" / "registry" / "leak").exists()


def test_only_listed_files_are_loaded_and_the_checked_bytes_are_the_loaded_ones(
    client: TestClient,
) -> None:
    job, _ = finished_job(client)
    registry = client.app.state.services.registry  # type: ignore[attr-defined]
    row = registry.register_job(job)
    stored = Path(registry.storage_uri) / row.artifact
    (stored / "added.safetensors").write_bytes(b"dropped in after registration")
    with registry.verified_copy(registry.resolve("arith:1")) as folder:
        assert folder != stored and not (folder / "added.safetensors").exists()
        assert sorted(p.name for p in folder.iterdir()) == sorted(row.files)
        # Swapping the stored weights now cannot change what is loaded: the loader reads
        # the private copy, whose bytes were hashed as they were written.
        (stored / "model.safetensors").write_bytes(b"swapped after the check")
        weights = (folder / "model.safetensors").read_bytes()
        assert hashlib.sha256(weights).hexdigest() == row.files["model.safetensors"]
        assert (folder.stat().st_mode & 0o077) == 0  # private to the serving process
        predictor = NumericPredictor.from_checkpoint(folder)
    assert not folder.exists()  # removed once loaded
    assert predictor.predict(["1 + 1 ="], max_new_tokens=2, samples=0)[0].text is not None
    with (
        pytest.raises(ArtifactError, match="sha256"),
        registry.verified_copy(registry.resolve("arith:1")),
    ):
        pass


def test_a_symlink_put_in_a_version_folder_is_refused(client: TestClient) -> None:
    job, _ = finished_job(client)
    registry = client.app.state.services.registry  # type: ignore[attr-defined]
    row = registry.register_job(job)
    stored = Path(registry.storage_uri) / row.artifact
    config = stored / "config.json"
    kept = config.read_bytes()
    config.unlink()
    moved = stored.parent / "config-elsewhere.json"
    moved.write_bytes(kept)  # the same bytes, reached through a link
    config.symlink_to(moved)
    with (
        pytest.raises(ArtifactError, match="symlink"),
        registry.verified_copy(registry.resolve("arith:1")),
    ):
        pass
