"""Issue 45 items 7 (N3) and 13 (N11): a version number past SQLite's integers is a 404 or
422 on every route that takes one (never the driver's OverflowError, a 500), and a
checkpoint registered under one name is not silently answered as a version of another."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.registry import ModelNotFound
from tests.security.conftest import ADMIN, auth
from tests.support.registry import finished_job
from tests.support.web import ORIGIN, login

HUGE = 2**63  # one past the largest stored integer
HUGER = 10**40


def test_a_version_past_the_largest_integer_is_a_404_or_422(client: TestClient) -> None:
    job, _ = finished_job(client)
    registry = client.app.state.services.registry  # type: ignore[attr-defined]
    registry.register_job(job)
    client.follow_redirects = False
    csrf = login(client, ADMIN)  # the dashboard's form below, logged in, with CSRF
    for number in (HUGE, HUGER):
        check_routes(client, registry, csrf, number)
    assert registry.resolve("arith:1").version == 1  # the real version still reads


def check_routes(client: TestClient, registry: Any, csrf: str, number: int) -> None:
    r = client.get(f"/v1/models/arith/versions/{number}", headers=auth())
    assert r.status_code == 404, r.text
    r = client.delete(f"/v1/models/arith/versions/{number}", headers=auth())
    assert r.status_code == 404, r.text
    r = client.put("/v1/models/arith/aliases/prod", json={"version": number}, headers=auth())
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "version", r.text
    # The dashboard's alias form moves it through the same path.
    form = {"alias": "prod", "version": str(number), "confirmed": "yes", "csrf": csrf}
    r = client.post("/ui/models/arith/alias", data=form, headers={"Origin": ORIGIN})
    assert r.status_code == 422, r.text
    # Serving's predict, completions, models/{ref} and calibrate resolve a reference with
    # these two calls (service/serving/deployment.py): a clean "not found", a 404 there.
    with pytest.raises(ModelNotFound, match="no version"):
        registry.resolve(f"arith:{number}", "admin")
    with pytest.raises(ModelNotFound):
        registry.pin(f"arith:{number}", None)


def test_a_checkpoint_registered_under_another_name_is_a_409_naming_it(
    client: TestClient,
) -> None:
    job, _ = finished_job(client)
    r = client.post("/v1/models/first/versions", json={"job_id": job.id}, headers=auth())
    assert r.status_code == 201 and r.json()["ref"] == "first:1", r.text
    r = client.post("/v1/models/second/versions", json={"job_id": job.id}, headers=auth())
    assert r.status_code == 409, r.text
    assert "first:1" in r.json()["detail"]
    assert client.get("/v1/models/second", headers=auth()).status_code == 404
    # The same name again is still the no-op it was.
    r = client.post("/v1/models/first/versions", json={"job_id": job.id}, headers=auth())
    assert r.status_code == 201 and r.json()["ref"] == "first:1", r.text
    # The registrar's retry of the job's own registration takes the version that exists.
    registry = client.app.state.services.registry  # type: ignore[attr-defined]
    assert (registry.register_job(job).name, registry.register_job(job).version) == ("first", 1)
