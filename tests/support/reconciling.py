"""An app on a stubbed Ray whose reconciler passes the test runs by hand, one at a time: for
unit tests of what the reconciler decides (start-up retries, runs Ray lost)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.support.api import ADMIN, auth
from tests.support.stub_backend import StubBackend

H = auth(ADMIN)


@contextmanager
def hand_reconciled(home: Path, backend: StubBackend, start_retries: int) -> Iterator[TestClient]:
    settings = Settings(
        home=home, admin_token=ADMIN, storage=str(home / "storage"), start_retries=start_retries
    )
    with TestClient(create_app(settings, backend=backend, reconcile=False)) as client:
        yield client


def reconcile(client: TestClient) -> None:
    client.app.state.reconciler.run_once()  # type: ignore[attr-defined]


def record(client: TestClient, job_id: str) -> dict[str, Any]:
    """A job's (or a sweep's) record as GET returns it."""
    kind = "tunes" if job_id.startswith("tune-") else "jobs"
    found: dict[str, Any] = client.get(f"/v1/{kind}/{job_id}", headers=H).json()
    return found
