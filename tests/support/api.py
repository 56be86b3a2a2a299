"""The API's test credentials: the admin token every test app is built with, and tokens
minted through the real /v1/tokens route."""

from __future__ import annotations

from fastapi.testclient import TestClient

ADMIN = "adm_Xk3pL9vQ2mW7rT5nB8yC4jH6fD1gS0aZ"


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def token_for(client: TestClient, owner: str, *scopes: str) -> str:
    r = client.post(
        "/v1/tokens", json={"owner": owner, "scopes": list(scopes)}, headers=auth(ADMIN)
    )
    assert r.status_code == 201, r.text
    return str(r.json()["token"])
