"""REST behaviour of the control plane with Ray stubbed at the backend boundary."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.support.stub_backend import StubBackend

ADMIN = "adm_Xk3pL9vQ2mW7rT5nB8yC4jH6fD1gS0aZ"
GOOD = {"name": "tiny", "model": {"source": "random:tiny-digit"}, "loss": {"name": "smmd"}}


@pytest.fixture
def backend() -> StubBackend:
    return StubBackend()


@pytest.fixture
def client(tmp_path: Path, backend: StubBackend) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path, admin_token=ADMIN, max_body_bytes=64_000)
    app = create_app(settings, backend=backend, reconcile=False)
    with TestClient(app) as c:
        yield c


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def token_for(client: TestClient, owner: str, *scopes: str) -> str:
    r = client.post(
        "/v1/tokens", json={"owner": owner, "scopes": list(scopes)}, headers=auth(ADMIN)
    )
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


def with_(path: str, value: Any) -> dict[str, Any]:
    """GOOD with one nested field replaced: with_("loss.bandwidth", -1)."""
    spec = json.loads(json.dumps(GOOD))
    *parents, leaf = path.split(".")
    node = spec
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value
    return spec


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


# (name, method, path, body-or-raw, extra headers, expected status, text the error must name)
BAD: list[tuple[str, str, str, Any, dict[str, str], int, str]] = [
    ("unknown loss", "POST", "/v1/jobs", with_("loss.name", "l2"), {}, 422, "loss.name"),
    (
        "negative bandwidth",
        "POST",
        "/v1/jobs",
        with_("loss.bandwidth", -1.0),
        {},
        422,
        "loss.bandwidth",
    ),
    ("zero bandwidth", "POST", "/v1/jobs", with_("loss.bandwidth", 0), {}, 422, "loss.bandwidth"),
    (
        "NaN weight",
        "POST",
        "/v1/jobs",
        json.dumps(with_("loss.weight", float("nan"))),
        {},
        422,
        "loss.weight",
    ),
    (
        "infinite lr",
        "POST",
        "/v1/jobs",
        json.dumps(with_("train.lr", float("inf"))),
        {},
        422,
        "train.lr",
    ),
    ("zero steps", "POST", "/v1/jobs", with_("train.steps", 0), {}, 422, "train.steps"),
    (
        "warmup past steps",
        "POST",
        "/v1/jobs",
        with_("train.warmup_steps", 500),
        {},
        422,
        "warmup_steps",
    ),
    (
        "missing dataset file",
        "POST",
        "/v1/jobs",
        with_("data", {"task": "jsonl", "path": "/nonexistent/train.jsonl"}),
        {},
        422,
        "data.path",
    ),
    (
        "relative dataset path",
        "POST",
        "/v1/jobs",
        with_("data", {"task": "jsonl", "path": "train.jsonl"}),
        {},
        422,
        "data.path",
    ),
    (
        "jsonl without a file",
        "POST",
        "/v1/jobs",
        with_("data", {"task": "jsonl"}),
        {},
        422,
        "data.path",
    ),
    (
        "unknown module",
        "POST",
        "/v1/jobs",
        with_("data.modules", ["calculus"]),
        {},
        422,
        "data.modules",
    ),
    (
        "unknown model preset",
        "POST",
        "/v1/jobs",
        with_("model.source", "random:huge"),
        {},
        422,
        "model.source",
    ),
    (
        "missing model folder",
        "POST",
        "/v1/jobs",
        with_("model.source", "/no/such/model"),
        {},
        422,
        "model.source",
    ),
    (
        "user runtime_env",
        "POST",
        "/v1/jobs",
        with_("runtime_env", {"pip": ["evil"]}),
        {},
        422,
        "runtime_env",
    ),
    ("name with spaces", "POST", "/v1/jobs", with_("name", "my job; rm -rf /"), {}, 422, "name"),
    ("missing name", "POST", "/v1/jobs", {"loss": {"name": "emd"}}, {}, 422, "name"),
    (
        "zero workers",
        "POST",
        "/v1/jobs",
        with_("scaling.num_workers", 0),
        {},
        422,
        "scaling.num_workers",
    ),
    (
        "bf16 deepspeed on cpu",
        "POST",
        "/v1/jobs",
        with_("train.precision", "bf16") | {"scaling": {"deepspeed": {"stage": 2}}},
        {},
        422,
        "precision",
    ),
    (
        "offload on cpu workers",
        "POST",
        "/v1/jobs",
        with_("scaling.deepspeed", {"stage": 2, "offload_optimizer": True}),
        {},
        422,
        "offload_optimizer",
    ),
    ("malformed JSON", "POST", "/v1/jobs", '{"name": "x",', {}, 422, "not valid JSON"),
    ("JSON list body", "POST", "/v1/jobs", "[1, 2]", {}, 422, "invalid_request"),
    (
        "oversized body",
        "POST",
        "/v1/jobs",
        json.dumps(with_("name", "x" * 70_000)),
        {},
        413,
        "body_too_large",
    ),
    (
        "wrong content type",
        "POST",
        "/v1/jobs",
        "name: tiny",
        {"Content-Type": "application/yaml"},
        415,
        "application/json",
    ),
    (
        "untunable field",
        "POST",
        "/v1/tunes",
        {"name": "s", "base": GOOD, "space": {"steps": {"kind": "choice", "values": [1]}}},
        {},
        422,
        "space",
    ),
    (
        "negative loguniform",
        "POST",
        "/v1/tunes",
        {
            "name": "s",
            "base": GOOD,
            "space": {"bandwidth": {"kind": "loguniform", "low": -1, "high": 2}},
        },
        {},
        422,
        "space",
    ),
    (
        "ASHA without eval_every",
        "POST",
        "/v1/tunes",
        {
            "name": "s",
            "base": GOOD,
            "space": {"bandwidth": {"kind": "uniform", "low": 1, "high": 2}},
        },
        {},
        422,
        "eval_every",
    ),
    ("limit zero", "GET", "/v1/jobs?limit=0", None, {}, 422, "limit"),
    ("bad status filter", "GET", "/v1/jobs?status=done", None, {}, 422, "status"),
    ("forged cursor", "GET", "/v1/jobs?cursor=bm90LWEtY3Vyc29y", None, {}, 422, "cursor"),
    ("unknown job", "GET", "/v1/jobs/job-0000000000000000", None, {}, 404, "job-0000000000000000"),
    ("other owner's job", "GET", "/v1/jobs/{bob_job}", None, {}, 404, "not_found"),
    ("other owner's cancel", "POST", "/v1/jobs/{bob_job}/cancel", None, {}, 404, "not_found"),
    ("listing another owner", "GET", "/v1/jobs?owner=bob", None, {}, 403, "admin"),
    ("cancel a finished job", "POST", "/v1/jobs/{done_job}/cancel", None, {}, 409, "succeeded"),
    ("delete a running job", "DELETE", "/v1/jobs/{running_job}", None, {}, 409, "running"),
    (
        "idempotency key, other body",
        "POST",
        "/v1/jobs",
        with_("loss.weight", 0.9),
        {"Idempotency-Key": "used"},
        409,
        "Idempotency-Key",
    ),
    (
        "bad token",
        "GET",
        "/v1/jobs",
        None,
        {"Authorization": "Bearer nt_wrong"},
        401,
        "unknown or revoked",
    ),
    ("no token", "POST", "/v1/jobs", GOOD, {"Authorization": ""}, 401, "bearer"),
    (
        "read-only token submits",
        "POST",
        "/v1/jobs",
        GOOD,
        {"Authorization": "Bearer {reader}"},
        403,
        "submit",
    ),
    (
        "non-admin creates tokens",
        "POST",
        "/v1/tokens",
        {"owner": "eve", "scopes": ["admin"]},
        {},
        403,
        "admin",
    ),
]


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
