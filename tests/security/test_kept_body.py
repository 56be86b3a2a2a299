"""A resume's kept work (up to NUMTUNE_MAX_KEPT_BYTES; ~0.5 s of parsing and ~2.4 s of
validation for 15 MiB on this machine) is parsed and validated in worker threads, not on the
event loop: another client's request is answered meanwhile. A bad piece is still a 422
naming its field, and records nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.platform import json_body
from service.studies.kept import StudyResume
from tests.security.conftest import auth, token_for

SPEC = {"name": "pg", "base": {"name": "b", "model": {"source": "random:tiny-char"},
        "data": {"task": "jsonl", "path": "bundled:arithmetic"}}, "arms": [{"name": "smmd"}],
        "seeds": [0, 1]}  # fmt: skip
# A kept run with nothing but its arm: every other field it needs is missing.
BODY = {"spec": SPEC, "kept": {"study": "study-0", "name": "pg", "runs": [{"arm": "ce"}]}}


def holding(
    real: Callable[..., Any],
    entered: threading.Event,
    answered: threading.Event,
    held: dict[str, Any],
) -> Callable[..., Any]:
    """`real`, entered only once another client's request has been answered: on the event
    loop that request could not be answered until this returns, so the wait would run out
    instead of being released."""

    def hold(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        held["released"] = answered.wait(timeout=30)
        return real(*args, **kwargs)

    return hold


@pytest.mark.parametrize("step", ["parsed", "validated"])
def test_another_clients_request_is_answered_while_kept_work_is_parsed_and_validated(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    entered, answered = threading.Event(), threading.Event()
    held: dict[str, Any] = {}
    if step == "parsed":
        monkeypatch.setattr(json_body, "parse", holding(json_body.parse, entered, answered, held))
    else:
        real = StudyResume.model_validate
        monkeypatch.setattr(StudyResume, "model_validate", holding(real, entered, answered, held))
    ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "read")
    sent: dict[str, Any] = {}
    post = threading.Thread(target=lambda: sent.update(
        r=client.post("/v1/studies/resume", json=BODY, headers=auth(ann))))  # fmt: skip
    post.start()
    assert entered.wait(timeout=30), f"the route never {step} the kept work off the loop"
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


def test_a_kept_body_that_is_not_json_is_a_422_from_the_worker_thread(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    headers = {**auth(ann), "content-type": "application/json"}
    r = client.post("/v1/studies/resume", content=b'{"spec": ', headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == [
        {"field": "(body)", "message": "the body is not valid JSON at character 9"}
    ], r.text
