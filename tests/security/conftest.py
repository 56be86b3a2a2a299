"""The control plane over HTTP-in-process (TestClient) with Ray stubbed at the backend,
a home of its own per test, and tokens for two owners."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.support.stub_backend import StubBackend

ADMIN = "adm_Q7vL3pX9kM2wR8tN5bY4cJ6hF1dG0sZ"


def auth(token: str = ADMIN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def token_for(client: TestClient, owner: str, *scopes: str) -> str:
    r = client.post("/v1/tokens", json={"owner": owner, "scopes": list(scopes)}, headers=auth())
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path, admin_token=ADMIN, storage=str(tmp_path / "storage"))


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings, backend=StubBackend(), reconcile=False)) as c:
        yield c
