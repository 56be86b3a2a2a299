"""The dashboard's test calls: TestClient's own origin (what the origin checks accept), a
login that returns the new session's CSRF token, and a job submitted over the API."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.unit.api_cases import GOOD

ORIGIN = "http://testserver"  # TestClient's own origin


def login(client: TestClient, token: str) -> str:
    """Log in; the CSRF token of the new session (read from a page's form)."""
    client.cookies.clear()
    r = client.post("/ui/login", data={"token": token}, headers={"Origin": ORIGIN})
    assert r.status_code == 303 and r.headers["location"] == "/ui/jobs", r.text
    page = client.get("/ui/jobs")
    assert page.status_code == 200
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert found
    return found.group(1)


def submit(client: TestClient, token: str, name: str = "run") -> str:
    r = client.post(
        "/v1/jobs", json=GOOD | {"name": name}, headers={"Authorization": f"Bearer {token}"}
    )
    assert r.status_code == 202, r.text
    return str(r.json()["id"])
