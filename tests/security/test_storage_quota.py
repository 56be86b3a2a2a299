"""Issue 30 item 17 (L8): an admin-set storage quota per owner; an upload past it is a 413
quota_exceeded that stores nothing, other owners are not affected, and deleting frees it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from httpx import Response

from service.app import create_app
from service.settings import Settings
from tests.security.conftest import ADMIN, auth, token_for
from tests.support.stub_backend import StubBackend

QUOTA = 4096
ROWS = "".join(
    json.dumps({"prompt": f"What is {i} + 1000?", "answer": i + 1000}) + "\n" for i in range(40)
).encode()  # about 1.6 KB: two fit in the quota, three do not


@pytest.fixture
def small(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path, admin_token=ADMIN, owner_quota_bytes=QUOTA)
    with TestClient(create_app(settings, backend=StubBackend(), reconcile=False)) as c:
        yield c


def upload(client: TestClient, token: str) -> Response:
    files = {"file": ("rows.jsonl", ROWS)}
    return client.post("/v1/files", files=files, data={"purpose": "fine-tune"}, headers=auth(token))


def test_uploads_past_the_owner_quota_are_refused(small: TestClient, tmp_path: Path) -> None:
    ann, bob = token_for(small, "ann", "submit"), token_for(small, "bob", "submit")
    kept = [upload(small, ann) for _ in range(2)]
    assert [r.status_code for r in kept] == [201, 201]
    over = upload(small, ann)
    assert over.status_code == 413, over.text
    assert over.json()["error"] == "quota_exceeded"
    listed = small.get("/v1/files", headers=auth(ann)).json()["data"]
    assert len(listed) == 2
    assert len(list((tmp_path / "storage" / "files" / "ann").iterdir())) == 2  # nothing left
    assert upload(small, bob).status_code == 201
    first = kept[0].json()["id"]
    assert small.delete(f"/v1/files/{first}", headers=auth(ann)).status_code == 200
    assert upload(small, ann).status_code == 201
