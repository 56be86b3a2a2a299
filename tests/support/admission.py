"""The admission tests' control plane: an app with Ray stubbed at the backend boundary
(its capacity included) and the reconciler run by hand, its admin token, and the calls
that post, read and reconcile jobs and sweeps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.support.stub_backend import StubBackend

ADMIN = "adm_Qd7vLp2Xn9Wk4Rs6Ty1Zb8Hc3Mf5Jg0A"
H = {"Authorization": f"Bearer {ADMIN}"}


def job(name: str, workers: int = 2, cpus: float = 1.0, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "model": {"source": "random:tiny-digit"},
        "scaling": {"num_workers": workers, "cpus_per_worker": cpus},
        **extra,
    }


def sweep(name: str, cpus: float, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "base": job(name, workers=1, cpus=cpus, train={"steps": 20, "eval_every": 10}),
        "space": {"bandwidth": {"kind": "uniform", "low": 0.5, "high": 4}},
        **extra,
    }


def make_client(tmp_path: Path, backend: StubBackend, **settings: Any) -> Iterator[TestClient]:
    # The stub cluster runs no serving replica unless a test says so: nothing reserved.
    settings.setdefault("reserved_cpus", 0.0)
    app = create_app(
        Settings(home=tmp_path, admin_token=ADMIN, **settings), backend=backend, reconcile=False
    )
    with TestClient(app) as c:
        yield c


def token(client: TestClient, owner: str) -> dict[str, str]:
    r = client.post("/v1/tokens", json={"owner": owner, "scopes": ["submit"]}, headers=H)
    return {"Authorization": f"Bearer {r.json()['token']}"}


def post(client: TestClient, spec: dict[str, Any], headers: dict[str, str] = H) -> str:
    path = "/v1/tunes" if "base" in spec else "/v1/jobs"
    r = client.post(path, json=spec, headers=headers)
    assert r.status_code == 202, r.text
    return str(r.json()["id"])


def record(client: TestClient, job_id: str) -> dict[str, Any]:
    kind = "tunes" if job_id.startswith("tune-") else "jobs"
    out: dict[str, Any] = client.get(f"/v1/{kind}/{job_id}", headers=H).json()
    return out


def reconcile(client: TestClient) -> None:
    client.app.state.reconciler.run_once()  # type: ignore[attr-defined]
