"""Issue 14 items 1 and 2: a job reads only data inside the data roots and models its
owner may read; a refused path is refused in the same words whether it exists or not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.modeling.folders import ModelUnavailableError
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import ModelSpec
from tests.security.conftest import auth, token_for
from tests.support.registry import finished_job

TINY = {"name": "tiny", "model": {"source": "random:tiny-digit"}}


def jsonl(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"prompt": "1+1", "answer": "2"}) + "\n")
    return path


def with_data(path: str) -> dict[str, Any]:
    return {**TINY, "data": {"task": "jsonl", "path": path}}


def problem(r: Any, field: str) -> str:
    assert r.status_code == 422, r.text
    [found] = [p for p in r.json()["detail"] if p["field"] == field]
    return str(found["message"])


def test_host_files_are_refused_alike_whether_they_exist_or_not(
    client: TestClient, tmp_path: Path
) -> None:
    ann = token_for(client, "ann", "submit")
    outside = jsonl(tmp_path / "elsewhere" / "rows.jsonl")
    messages = {
        problem(client.post("/v1/jobs", json=with_data(p), headers=auth(ann)), "data.path")
        for p in ("/etc/shadow", "/etc/passwd", "/etc/no-such-file", str(outside))
    }
    assert len(messages) == 1, messages  # existence cannot be probed by the answer
    assert "inside the data roots" in messages.pop()
    for path in ("relative/x://y", "file:///etc/passwd", "rows.jsonl"):
        r = client.post("/v1/jobs", json=with_data(path), headers=auth(ann))
        assert "inside the data roots" in problem(r, "data.path")
    assert client.get("/v1/jobs", headers=auth(ann)).json()["items"] == []  # nothing recorded


def test_a_symlink_out_of_the_data_root_is_refused_and_paths_are_resolved(
    client: TestClient, tmp_path: Path
) -> None:
    ann = token_for(client, "ann", "submit")
    root = tmp_path / "data"
    jsonl(root / "mine.jsonl")
    (root / "sneaky.jsonl").symlink_to("/etc/passwd")
    (root / "alias.jsonl").symlink_to(root / "mine.jsonl")
    r = client.post("/v1/jobs", json=with_data(str(root / "sneaky.jsonl")), headers=auth(ann))
    assert "inside the data roots" in problem(r, "data.path")
    r = client.post("/v1/jobs", json=with_data(str(root / "alias.jsonl")), headers=auth(ann))
    assert r.status_code == 202, r.text
    # Stored resolved: re-pointing the link later does not move the job elsewhere.
    assert r.json()["spec"]["data"]["path"] == str((root / "mine.jsonl").resolve())


def test_configured_data_roots_replace_the_default(tmp_path: Path) -> None:
    from service.settings import Settings

    shared = tmp_path / "shared"
    settings = Settings(home=tmp_path, data_roots=f"{shared}:{tmp_path / 'more'}")
    assert settings.data_root_paths == [shared.resolve(), (tmp_path / "more").resolve()]


def test_another_owners_registry_folder_and_hub_ids_are_refused(
    client: TestClient, tmp_path: Path
) -> None:
    job, _ = finished_job(client, owner="ann")
    services = client.app.state.services  # type: ignore[attr-defined]
    services.registry.register(name="secret", owner="ann", job=job)
    bob = token_for(client, "bob", "submit")
    folder = tmp_path / "storage" / "registry" / "secret" / "v1"
    assert (folder / "model.safetensors").is_file()
    for source in (str(folder), "someone/some-model", "registry:nosuch@production"):
        r = client.post("/v1/jobs", json={**TINY, "model": {"source": source}}, headers=auth(bob))
        problem(r, "model.source")
    theirs = client.post(
        "/v1/jobs", json={**TINY, "model": {"source": "registry:secret:1"}}, headers=auth(bob)
    )
    missing = client.post(
        "/v1/jobs", json={**TINY, "model": {"source": "registry:absent:1"}}, headers=auth(bob)
    )
    # Another owner's model reads exactly like a missing one.
    assert problem(theirs, "model.source").replace("secret", "X") == problem(
        missing, "model.source"
    ).replace("absent", "X")


def test_a_registry_reference_is_pinned_and_verified_by_the_job(
    client: TestClient, tmp_path: Path
) -> None:
    job, _ = finished_job(client, owner="ann")
    services = client.app.state.services  # type: ignore[attr-defined]
    row = services.registry.register(name="mine", owner="ann", job=job)
    services.registry.store.set_alias("mine", "production", 1)
    ann = token_for(client, "ann", "submit")
    forged = {"uri": "/etc", "files": {"passwd": "0" * 64}}
    body = {**TINY, "model": {"source": "registry:mine@production", "pinned": forged}}
    r = client.post("/v1/jobs", json=body, headers=auth(ann))
    assert r.status_code == 202, r.text
    model = r.json()["spec"]["model"]
    assert model["source"] == "registry:mine:1"  # the alias resolved at submission
    assert model["pinned"]["files"] == row.files  # the user's pin is replaced, never used
    spec = ModelSpec.model_validate(model)
    loaded, _ = load_model_and_tokenizer(spec)
    assert loaded.config.hidden_size == 64
    # One changed byte: the job refuses the version instead of training from it.
    weights = Path(spec.pinned.uri) / "model.safetensors"  # type: ignore[union-attr]
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))
    with pytest.raises(ModelUnavailableError, match="sha256"):
        load_model_and_tokenizer(spec)
    with pytest.raises(ModelUnavailableError, match="resolved by the control plane"):
        load_model_and_tokenizer(ModelSpec(source="registry:mine:1"))


def test_a_folder_inside_the_model_roots_is_accepted(client: TestClient, tmp_path: Path) -> None:
    ann = token_for(client, "ann", "submit")
    folder = tmp_path / "models" / "base"
    folder.mkdir(parents=True)
    r = client.post("/v1/jobs", json={**TINY, "model": {"source": str(folder)}}, headers=auth(ann))
    assert r.status_code == 202, r.text
    outside = tmp_path / "elsewhere-model"
    outside.mkdir()
    link = tmp_path / "models" / "out"
    link.symlink_to(outside, target_is_directory=True)  # a folder out of the roots, by a link
    r = client.post("/v1/jobs", json={**TINY, "model": {"source": str(link)}}, headers=auth(ann))
    problem(r, "model.source")


def test_registry_sources_are_references_and_only_they_are_pinned() -> None:
    from pydantic import ValidationError

    for bad in ("registry:../../etc", "registry:Name@prod", "registry:x:one", "registry:x"):
        with pytest.raises(ValidationError, match="registry:<name>@<alias>"):
            ModelSpec(source=bad)
    pin = {"uri": "/x", "files": {"model.safetensors": "0" * 64}}
    with pytest.raises(ValidationError, match="only registry: sources are pinned"):
        ModelSpec.model_validate({"source": "random:tiny-digit", "pinned": pin})
    assert ModelSpec.model_validate({"source": "registry:m@prod", "pinned": pin}).pinned
    escaping = {"uri": "/etc", "files": {"../etc/passwd": "0" * 64}}
    spec = ModelSpec.model_validate({"source": "registry:m:1", "pinned": escaping})
    with pytest.raises(ModelUnavailableError, match="not a safe entry"):
        load_model_and_tokenizer(spec)
