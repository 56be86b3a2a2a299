"""REST behaviour of the control plane with Ray stubbed at the backend boundary."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.support.api import ADMIN, auth, token_for
from tests.support.stub_backend import StubBackend
from tests.unit.api_cases import BAD, GOOD


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend()


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path, admin_token=ADMIN, max_body_bytes=64_000)
    app = create_app(settings, backend=backend, reconcile=False)
    with TestClient(app) as c:
        yield c


def test_submit_get_list_and_idempotency(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    r = client.post("/v1/jobs", json=GOOD, headers={**auth(ann), "Idempotency-Key": "k"})
    assert r.status_code == 202 and r.json()["status"] == "queued"
    job = r.json()
    again = client.post("/v1/jobs", json=GOOD, headers={**auth(ann), "Idempotency-Key": "k"})
    assert again.status_code == 202 and again.json()["id"] == job["id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    assert (
        client.get(f"/v1/jobs/{job['id']}", headers=auth(ann)).json()["spec"]["loss"]["name"]
        == "smmd"
    )
    listed = client.get("/v1/jobs", params={"status": "queued"}, headers=auth(ann)).json()
    assert [j["id"] for j in listed["items"]] == [job["id"]]


def test_reconciler_submits_and_cancel_stops(client: TestClient, backend: StubBackend) -> None:
    ann = token_for(client, "ann", "submit")
    job = client.post("/v1/jobs", json=GOOD, headers=auth(ann)).json()
    client.app.state.reconciler.run_once()  # type: ignore[attr-defined]
    assert backend.submitted == [job["id"]]
    client.app.state.reconciler.run_once()  # type: ignore[attr-defined]
    assert client.get(f"/v1/jobs/{job['id']}", headers=auth(ann)).json()["status"] == "running"
    r = client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth(ann))
    assert r.status_code == 202 and r.json()["status"] == "cancelled"
    assert r.json()["reason"] == "cancelled" and backend.stopped == [job["id"]]


def test_a_revoked_token_is_refused_at_once(client: TestClient) -> None:
    # The token's principal is cached after its first use; revoking must drop that.
    created = client.post(
        "/v1/tokens", json={"owner": "ann", "scopes": ["read"]}, headers=auth(ADMIN)
    ).json()
    assert client.get("/v1/jobs", headers=auth(created["token"])).status_code == 200
    revoked = client.delete(f"/v1/tokens/{created['id']}", headers=auth(ADMIN))
    assert revoked.status_code == 204
    again = client.get("/v1/jobs", headers=auth(created["token"]))
    assert again.status_code == 401 and "revoked" in again.json()["detail"]


def test_admin_token_required_at_start(tmp_path: Path) -> None:
    from service.settings import InsecureSettingsError

    with pytest.raises(InsecureSettingsError, match="NUMTUNE_ADMIN_TOKEN"):
        create_app(Settings(home=tmp_path), backend=StubBackend())
    with pytest.raises(InsecureSettingsError, match=r"127\.0\.0\.1"):
        create_app(Settings(home=tmp_path, dev=True, host="0.0.0.0"), backend=StubBackend())
    app = create_app(Settings(home=tmp_path, dev=True), backend=StubBackend())
    token = (tmp_path / "admin-token").read_text().strip()
    assert (tmp_path / "admin-token").stat().st_mode & 0o077 == 0
    with TestClient(app) as c:
        assert c.get("/v1/jobs", headers=auth(token)).status_code == 200
        assert c.get("/healthz").status_code == 200
        assert c.get("/v1/jobs").status_code == 401


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_a_4xx_naming_the_problem_and_submits_nothing(
    client: TestClient, backend: StubBackend, case: tuple[Any, ...]
) -> None:
    _, method, path, body, headers, status, needle = case
    ann = token_for(client, "ann", "submit")
    reader = token_for(client, "ann", "read")
    store = client.app.state.services.jobs  # type: ignore[attr-defined]
    ids = {
        "bob_job": store.create(kind="job", name="b", owner="bob", spec={})[0].id,
        "done_job": store.create(kind="job", name="d", owner="ann", spec={})[0].id,
        "running_job": store.create(kind="job", name="r", owner="ann", spec={})[0].id,
    }
    client.post("/v1/jobs", json=GOOD, headers={**auth(ann), "Idempotency-Key": "used"})
    for key, path_to in (
        ("done_job", ["submitted", "succeeded"]),
        ("running_job", ["submitted", "running"]),
    ):
        previous = "queued"
        for nxt in path_to:
            assert store.transition(ids[key], previous, nxt)
            previous = nxt
    store.transition(ids["bob_job"], "queued", "submitted")
    before = store.page(kind="job", owner=None, limit=200)[0]
    client.app.state.reconciler.run_once()  # type: ignore[attr-defined]
    submitted_before = list(backend.submitted)

    headers = {**auth(ann), **{k: v.format(reader=reader) for k, v in headers.items()}}
    if headers.get("Authorization") == "":
        del headers["Authorization"]
    kwargs: dict[str, Any] = {"headers": headers}
    if isinstance(body, str):
        kwargs["content"] = body
        headers.setdefault("Content-Type", "application/json")
    elif body is not None:
        kwargs["json"] = body
    r = client.request(method, path.format(**ids), **kwargs)

    assert r.status_code == status, r.text
    payload = r.json()
    assert set(payload) == {"error", "detail"}
    assert needle.lower() in r.text.lower(), payload
    # Nothing recorded, nothing submitted.
    after = store.page(kind="job", owner=None, limit=200)[0]
    assert {j.id for j in after} == {j.id for j in before}
    client.app.state.reconciler.run_once()  # type: ignore[attr-defined]
    assert backend.submitted == submitted_before
