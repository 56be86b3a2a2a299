"""Issue 30 items 12 (L3) and 18 (L9): the dashboard's alias form applies the API's alias
rules, and a page's notice comes from a code, never from text in the URL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.support.api import ADMIN, token_for
from tests.support.stub_backend import StubBackend
from tests.support.web import ORIGIN, login, submit


@pytest.fixture
def web(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path, admin_token=ADMIN)
    app = create_app(settings, backend=StubBackend(), reconcile=False)
    with TestClient(app, follow_redirects=False) as c:
        yield c


def registered(web: TestClient, owner_token: str, owner: str) -> str:
    """A model `arith` of one version, recorded as the registry records a finished job."""
    services = web.app.state.services  # type: ignore[attr-defined]
    job_id = submit(web, owner_token)
    number = services.registry.store.reserve_version("arith", owner)
    services.registry.store.add_version(
        "arith", number, job_id=job_id, source="/s", artifact="a", files={}, spec={},
        dataset={}, metrics={},
    )  # fmt: skip
    return "arith"


@pytest.mark.parametrize("alias", ["b c/d", "\x1b[31mred\x1b[0m", "<b>bold</b>", "prod@v2"])
def test_the_alias_form_refuses_what_the_api_refuses(web: TestClient, alias: str) -> None:
    ann = token_for(web, "ann", "submit")
    name = registered(web, ann, "ann")
    csrf = login(web, ann)
    form = {"csrf": csrf, "alias": alias, "version": "1", "confirmed": "yes"}
    r = web.post(f"/ui/models/{name}/alias", data=form, headers={"Origin": ORIGIN})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["field"] == "alias"
    listed = web.get(f"/v1/models/{name}", headers={"Authorization": f"Bearer {ADMIN}"})
    assert listed.json()["aliases"] == {}
    # The registry itself holds the same rule, for any other caller.
    with pytest.raises(ValueError, match="a letter"):
        web.app.state.services.registry.set_alias(name, alias, 1)  # type: ignore[attr-defined]


def test_a_page_notice_is_chosen_by_code_not_written_by_the_link(web: TestClient) -> None:
    ann = token_for(web, "ann", "submit")
    name = registered(web, ann, "ann")
    csrf = login(web, ann)
    bait = "Your session expired: sign in again at https://evil.example"
    page = web.get("/ui/models", params={"msg": bait})
    assert page.status_code == 200 and "evil.example" not in page.text
    assert 'id="msg"' not in page.text
    form = {"csrf": csrf, "alias": "production", "version": "1", "confirmed": "yes"}
    moved = web.post(f"/ui/models/{name}/alias", data=form, headers={"Origin": ORIGIN})
    assert moved.status_code == 303 and moved.headers["location"] == "/ui/models?msg=alias_moved"
    shown = web.get(moved.headers["location"])
    assert 'id="msg"' in shown.text and "The alias was moved" in shown.text
    job = submit(web, ann, "other")
    assert "evil.example" not in web.get(f"/ui/jobs/{job}", params={"msg": bait}).text
