"""A resume's kept work (up to NUMTUNE_MAX_KEPT_BYTES; ~2.4 s of validation for 15 MiB on
this machine) is validated in a worker thread, not on the event loop: another client's
request is answered while it is. A bad piece is still a 422 naming its field, and records
nothing."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.studies.kept import StudyResume
from tests.security.conftest import auth, token_for

SPEC = {"name": "pg", "base": {"name": "b", "model": {"source": "random:tiny-char"},
        "data": {"task": "jsonl", "path": "bundled:arithmetic"}}, "arms": [{"name": "smmd"}],
        "seeds": [0, 1]}  # fmt: skip
# A kept run with nothing but its arm: every other field it needs is missing.
BODY = {"spec": SPEC, "kept": {"study": "study-0", "name": "pg", "runs": [{"arm": "ce"}]}}


def test_another_clients_request_is_answered_while_kept_work_is_validated(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, answered = threading.Event(), threading.Event()
    held: dict[str, Any] = {}
    real = StudyResume.model_validate

    def validate(raw: Any, *args: Any, **kwargs: Any) -> StudyResume:
        entered.set()
        # On the event loop, bob's request below could not be answered until this returns:
        # the wait would run out instead of being released.
        held["released"] = answered.wait(timeout=30)
        return real(raw, *args, **kwargs)

    monkeypatch.setattr(StudyResume, "model_validate", validate)
    ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "read")
    sent: dict[str, Any] = {}
    post = threading.Thread(target=lambda: sent.update(
        r=client.post("/v1/studies/resume", json=BODY, headers=auth(ann))))  # fmt: skip
    post.start()
    assert entered.wait(timeout=30), "the route never validated the kept work"
    other = client.get("/v1/studies", headers=auth(bob))
    answered.set()
    post.join(timeout=60)
    assert other.status_code == 200, other.text
    assert held["released"] is True
    refused = sent["r"]
    assert refused.status_code == 422, refused.text
    fields = {e["field"] for e in refused.json()["detail"]}
    assert {"kept.runs.0.job_id", "kept.runs.0.seed"} <= fields, fields
    assert client.get("/v1/studies", headers=auth(ann)).json()["items"] == []


def test_a_kept_body_that_is_not_an_object_is_a_422_not_a_500(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    for body in ([BODY], "kept", None):
        r = client.post("/v1/studies/resume", json=body, headers=auth(ann))
        assert r.status_code == 422, (body, r.text)
        assert r.json()["detail"][0]["field"] == "(body)", r.text
