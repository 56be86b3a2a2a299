"""/v1/fine_tuning/jobs calls: a training file uploaded for fine-tuning, and a create with
whatever body a test sends."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.support.api import auth
from tests.support.files import GOOD_ROWS


def uploaded(client: TestClient, token: str) -> str:
    # 16 rows: one held out leaves more than one batch of the default 8.
    r = client.post("/v1/files", files={"file": ("rows.jsonl", (GOOD_ROWS * 2).encode())},
                    data={"purpose": "fine-tune"}, headers=auth(token))  # fmt: skip
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def create(client: TestClient, token: str, **body: Any) -> Any:
    return client.post("/v1/fine_tuning/jobs", json=body, headers=auth(token))
