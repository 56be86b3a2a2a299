"""Rows the file tests upload, and an upload through /v1/files that returns the raw reply
(the tests check its status and body themselves)."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from httpx import Response

from tests.support.api import auth

# Eight well-formed fine-tuning rows, "What is i + 1?" -> i + 1.
GOOD_ROWS = "".join(json.dumps({"prompt": f"What is {i} + 1?", "answer": i + 1}) + "\n"
                    for i in range(8))  # fmt: skip
ROW = {"prompt": "What is 2 + 2?", "answer": 4}


def upload(client: TestClient, token: str, data: bytes, purpose: str, name: str) -> Response:
    files = {"file": (name, data)}
    return client.post("/v1/files", files=files, data={"purpose": purpose}, headers=auth(token))
