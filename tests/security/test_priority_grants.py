"""Priority classes at the door (issue 47 item 2): a class the admin does not define is a
422 naming the field; one the owner is not granted is a 403 naming it; the classes up to
the default are everyone's; a job that names none is stored with the default. Through the
real API, Ray stubbed at the backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.admission import H, job, make_client, sweep, token
from tests.support.stub_backend import StubBackend

CLASSES = {"priority_classes": "low,normal,high,urgent", "priority_grants": "high=ann|cy"}


def classed_sweep(priority: str) -> dict[str, Any]:
    spec = sweep("s", 1.0)
    spec["base"]["priority"] = priority
    return spec


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    yield from make_client(tmp_path, StubBackend(), **CLASSES)


def test_an_unknown_class_is_a_422_naming_priority(client: TestClient) -> None:
    bob = token(client, "bob")
    r = client.post("/v1/jobs", json=job("j", priority="top"), headers=bob)
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem["field"] == "priority"
    assert "unknown priority class 'top'" in problem["message"]
    assert "low, normal, high, urgent" in problem["message"]
    r = client.post("/v1/tunes", json=classed_sweep("top"), headers=bob)
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "base.priority", r.text
    # Not a class name at all: the spec's own check names it too.
    r = client.post("/v1/jobs", json=job("j", priority="High Now!"), headers=bob)
    assert r.status_code == 422 and "priority" in str(r.json()["detail"]), r.text


def test_a_class_above_the_default_needs_a_grant(client: TestClient) -> None:
    ann, bob = token(client, "ann"), token(client, "bob")
    r = client.post("/v1/jobs", json=job("j", priority="high"), headers=bob)
    assert r.status_code == 403, r.text
    assert r.json()["error"] == "forbidden"
    detail = r.json()["detail"]
    assert detail.startswith("priority: bob may not use priority class 'high'")
    assert "ann" not in detail  # others' grants are not told
    assert client.post("/v1/jobs", json=job("u", priority="urgent"), headers=ann).status_code == (
        403
    )  # a grant is for its class only
    granted = client.post("/v1/jobs", json=job("j", priority="high"), headers=ann)
    assert granted.status_code == 202, granted.text
    assert granted.json()["spec"]["priority"] == "high"
    r = client.post("/v1/tunes", json=classed_sweep("high"), headers=bob)
    assert r.status_code == 403 and r.json()["detail"].startswith("base.priority:"), r.text
    # Admin tokens may use every class.
    assert client.post("/v1/jobs", json=job("a", priority="urgent"), headers=H).status_code == 202


def test_everyone_has_the_default_and_below_and_none_means_the_default(
    client: TestClient,
) -> None:
    bob = token(client, "bob")
    for name in ("low", "normal"):
        r = client.post("/v1/jobs", json=job(name, priority=name), headers=bob)
        assert r.status_code == 202 and r.json()["spec"]["priority"] == name, r.text
    plain = client.post("/v1/jobs", json=job("plain"), headers=bob).json()
    assert plain["spec"]["priority"] == "normal"  # stored as the class it was queued in
    tune = client.post("/v1/tunes", json=sweep("s", 1.0), headers=bob).json()
    assert tune["spec"]["base"]["priority"] == "normal"


def test_the_settings_refuse_what_cannot_work(tmp_path: Path) -> None:
    from service.settings import Settings

    for bad in (
        {"priority_classes": "low,low"},
        {"priority_classes": "low,normal", "priority_default": "high"},
        {"priority_grants": "top=ann"},
        {"priority_classes": "Low Class"},
    ):
        with pytest.raises(ValueError, match=r"priorit|class"):
            Settings(home=tmp_path, **bad)  # type: ignore[arg-type]
