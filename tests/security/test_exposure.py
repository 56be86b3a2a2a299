"""Issue 14 item 3: what a token-less or read-only caller can learn — no schema, no other
owners' job counts, no other owners' model names, no Ray error text."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.security.conftest import ADMIN, auth, token_for
from tests.support.registry import finished_job
from tests.support.stub_backend import StubBackend


def test_schema_and_docs_need_a_token(client: TestClient) -> None:
    assert client.get("/openapi.json").status_code == 401
    assert client.get("/docs").status_code == 404
    ann = token_for(client, "ann", "read")
    schema = client.get("/openapi.json", headers=auth(ann))
    assert schema.status_code == 200 and "/v1/jobs" in schema.json()["paths"]


def test_schema_and_docs_can_be_published_on_purpose(tmp_path: Path) -> None:
    published = Settings(home=tmp_path, admin_token=ADMIN, publish_docs=True)
    with TestClient(create_app(published, backend=StubBackend(), reconcile=False)) as c:
        assert c.get("/openapi.json").status_code == 200
        assert c.get("/docs").status_code == 200


def test_metrics_are_for_admins(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    assert client.get("/metrics", headers=auth(ann)).status_code == 403
    reply = client.get("/metrics", headers=auth())
    assert reply.status_code == 200 and "numtune_jobs" in reply.text


def test_another_owners_model_name_answers_like_a_missing_one(client: TestClient) -> None:
    job, _ = finished_job(client, owner="ann")
    services = client.app.state.services  # type: ignore[attr-defined]
    services.registry.register(name="private-name", owner="ann", job=job)
    bob_job, _ = finished_job(client, owner="bob")
    bob = token_for(client, "bob", "submit")
    squat = client.post(
        "/v1/models/private-name/versions", json={"job_id": bob_job.id}, headers=auth(bob)
    )
    missing = client.get("/v1/models/never-made", headers=auth(bob))
    assert squat.status_code == missing.status_code == 404
    assert squat.json()["detail"].replace("private-name", "X") == missing.json()["detail"].replace(
        "never-made", "X"
    )


def test_readyz_does_not_relay_rays_error_text(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, admin_token=ADMIN)
    down = StubBackend(reachable=False)
    with TestClient(create_app(settings, backend=down, reconcile=False)) as c:
        reply = c.get("/readyz", headers=auth(token_for(c, "ann", "read")))
    assert reply.status_code == 503
    assert reply.json()["checks"]["ray"] == "error: unreachable"
    assert "stub" not in reply.text
