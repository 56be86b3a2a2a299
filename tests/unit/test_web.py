"""The dashboard without Ray: session cookies, CSRF and origin checks, ownership, and each
page rendering from store rows (the browser tests drive the real stack)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import InsecureSettingsError, Settings
from service.web.session import COOKIE, SessionCodec, safe_next, same_origin
from tests.support.api import ADMIN, token_for
from tests.support.stub_backend import StubBackend
from tests.support.web import ORIGIN, login, submit
from tests.unit.api_cases import GOOD

# ---- session and CSRF logic ---------------------------------------------------------------


def test_session_round_trip_tamper_and_expiry() -> None:
    codec = SessionCodec("k" * 8 + "Zq81xLm2Pv9sT4rW", secure=False, max_age_s=60)
    session, cookie = codec.issue("nt_token_value", now=1000.0)
    assert "nt_token_value" not in cookie  # encrypted, not only signed
    assert codec.read(cookie, now=1030.0) == session
    assert codec.read(cookie, now=1061.0) is None  # past max_age
    flipped = cookie[:-5] + ("A" if cookie[-5] != "A" else "B") + cookie[-4:]
    assert codec.read(flipped, now=1030.0) is None
    other = SessionCodec("another-key-Zq81xLm2Pv9sT4rW", secure=False)
    assert other.read(cookie, now=1030.0) is None
    assert codec.read(None) is None and codec.read("garbage") is None


def test_csrf_token_is_per_session_and_checked_in_constant_time() -> None:
    codec = SessionCodec("key-Zq81xLm2Pv9sT4rW", secure=True)
    a, _ = codec.issue("tok")
    b, _ = codec.issue("tok")  # a new login: a new nonce, a new CSRF token
    assert codec.csrf_ok(a, codec.csrf_token(a))
    assert not codec.csrf_ok(a, codec.csrf_token(b))
    assert not codec.csrf_ok(a, None) and not codec.csrf_ok(a, "")
    attrs = codec.cookie_attributes()
    assert attrs["httponly"] is True and attrs["samesite"] == "strict" and attrs["secure"]


@pytest.mark.parametrize(
    ("origin", "referer", "ok"),
    [
        (ORIGIN, None, True),
        ("http://evil.example", None, False),
        ("null", f"{ORIGIN}/ui/jobs", False),  # Origin wins over a Referer
        (None, f"{ORIGIN}/ui/jobs/x", True),
        (None, "http://testserver.evil.example/ui", False),
        (None, None, False),
    ],
)
def test_same_origin(origin: str | None, referer: str | None, ok: bool) -> None:
    assert same_origin(ORIGIN, origin, referer) is ok


def test_safe_next_keeps_redirects_inside_the_dashboard() -> None:
    assert safe_next("/ui/jobs/job-1") == "/ui/jobs/job-1"
    for bad in ("https://evil.example/", "//evil.example/ui/", "/v1/jobs", "/ui/\\evil", None):
        assert safe_next(bad) == "/ui/jobs"


def test_weak_session_key_refused(tmp_path: Path) -> None:
    with pytest.raises(InsecureSettingsError, match="SESSION_KEY"):
        Settings(home=tmp_path, admin_token=ADMIN, session_key="changeme-changeme").check_secure()


# ---- the app ------------------------------------------------------------------------------


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(
        Settings(home=tmp_path, admin_token=ADMIN), backend=StubBackend(), reconcile=False
    )
    with TestClient(app, follow_redirects=False) as c:
        yield c


def test_logged_out_pages_redirect_to_login_and_back(client: TestClient) -> None:
    r = client.get("/ui/jobs/job-x?tab=1")
    assert r.status_code == 303
    assert r.headers["location"] == "/ui/login?next=%2Fui%2Fjobs%2Fjob-x%3Ftab%3D1"
    assert client.get("/ui/jobs/rows", headers={"X-Requested-With": "fetch"}).status_code == 401
    assert client.get("/ui/login").status_code == 200


def test_login_sets_a_strict_httponly_cookie_and_refuses_bad_tokens(client: TestClient) -> None:
    bad = client.post("/ui/login", data={"token": "nope"}, headers={"Origin": ORIGIN})
    assert bad.status_code == 401 and "unknown or revoked token" in bad.text
    foreign = client.post(
        "/ui/login", data={"token": ADMIN}, headers={"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403 and COOKIE not in foreign.cookies
    r = client.post(
        "/ui/login", data={"token": ADMIN, "next": "/ui/models"}, headers={"Origin": ORIGIN}
    )
    assert r.status_code == 303 and r.headers["location"] == "/ui/models"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert "Secure" not in cookie  # bound to loopback: plain http must keep working
    assert ADMIN not in cookie


def test_cookie_is_secure_off_loopback(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, admin_token=ADMIN, host="0.0.0.0")
    app = create_app(settings, backend=StubBackend(), reconcile=False)
    with TestClient(app, follow_redirects=False) as c:
        r = c.post("/ui/login", data={"token": ADMIN}, headers={"Origin": ORIGIN})
        assert "Secure" in r.headers["set-cookie"]


def test_other_owners_jobs_are_invisible_and_admins_see_owners(client: TestClient) -> None:
    ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
    anns = submit(client, ann, "anns-run")
    login(client, bob)
    assert anns not in client.get("/ui/jobs").text
    assert client.get(f"/ui/jobs/{anns}").status_code == 404
    assert client.get(f"/ui/compare?ids={anns}").status_code == 404
    login(client, ann)
    own = client.get("/ui/jobs/rows").text
    assert anns in own and "<th>owner</th>" not in client.get("/ui/jobs").text
    login(client, ADMIN)
    listed = client.get("/ui/jobs").text
    assert anns in listed and "<th>owner</th>" in listed and ">ann<" in listed


def test_cancel_needs_the_csrf_token_and_our_origin(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    job = submit(client, ann)
    csrf = login(client, ann)
    url = f"/ui/jobs/{job}/cancel"
    assert client.post(url, data={}, headers={"Origin": ORIGIN}).status_code == 403
    assert client.post(url, data={"csrf": "0" * 64}, headers={"Origin": ORIGIN}).status_code == 403
    evil = {"Origin": "http://evil.example"}
    assert client.post(url, data={"csrf": csrf}, headers=evil).status_code == 403
    assert client.post(url, data={"csrf": csrf}).status_code == 403  # no Origin, no Referer
    status = client.get(f"/v1/jobs/{job}", headers={"Authorization": f"Bearer {ann}"}).json()
    assert status["status"] == "queued"  # none of the refused posts did anything
    ok = client.post(url, data={"csrf": csrf}, headers={"Referer": f"{ORIGIN}/ui/jobs/{job}"})
    assert ok.status_code == 303 and ok.headers["location"] == f"/ui/jobs/{job}?msg=cancelled"
    status = client.get(f"/v1/jobs/{job}", headers={"Authorization": f"Bearer {ann}"}).json()
    assert status["status"] == "cancelled"


def test_read_token_cannot_cancel(client: TestClient) -> None:
    ann, reader = token_for(client, "ann", "submit"), token_for(client, "ann", "read")
    job = submit(client, ann)
    csrf = login(client, reader)
    assert "Cancel job" not in client.get(f"/ui/jobs/{job}").text
    r = client.post(f"/ui/jobs/{job}/cancel", data={"csrf": csrf}, headers={"Origin": ORIGIN})
    assert r.status_code == 403


def test_pause_and_resume_buttons_need_csrf_and_the_owner(client: TestClient) -> None:
    ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
    job = submit(client, ann)
    csrf = login(client, bob)
    other = client.post(f"/ui/jobs/{job}/pause", data={"csrf": csrf}, headers={"Origin": ORIGIN})
    assert other.status_code == 303 and other.headers["location"].endswith("msg=pause_not_found")
    csrf = login(client, ann)
    assert "Pause job" in client.get(f"/ui/jobs/{job}").text
    url = f"/ui/jobs/{job}/pause"
    assert client.post(url, data={}, headers={"Origin": ORIGIN}).status_code == 403  # no CSRF
    ok = client.post(url, data={"csrf": csrf}, headers={"Origin": ORIGIN})
    assert ok.status_code == 303 and ok.headers["location"] == f"/ui/jobs/{job}?msg=paused"
    shown = client.get(ok.headers["location"]).text
    assert "Resume job" in shown and "holds nothing until resumed" in shown
    back = client.post(f"/ui/jobs/{job}/resume", data={"csrf": csrf}, headers={"Origin": ORIGIN})
    assert back.headers["location"] == f"/ui/jobs/{job}?msg=resume_queued"
    events = client.get(f"/v1/jobs/{job}/events", headers={"Authorization": f"Bearer {ann}"})
    assert [(e["kind"], e["by"]) for e in events.json()["items"]] == [
        ("paused", "ann"),
        ("resumed", "ann"),
    ]


def test_revoked_token_ends_the_session(client: TestClient) -> None:
    r = client.post("/v1/tokens", json={"owner": "ann", "scopes": ["read"]},
                    headers={"Authorization": f"Bearer {ADMIN}"})  # fmt: skip
    created = r.json()
    login(client, created["token"])
    revoked = client.delete(
        f"/v1/tokens/{created['id']}", headers={"Authorization": f"Bearer {ADMIN}"}
    )
    assert revoked.status_code in (200, 204), revoked.text
    client.app.state.services.gate.forget()  # type: ignore[attr-defined]
    assert client.get("/ui/jobs").status_code == 303


def test_logout_needs_csrf_and_clears_the_cookie(client: TestClient) -> None:
    csrf = login(client, ADMIN)
    assert client.post("/ui/logout", data={}, headers={"Origin": ORIGIN}).status_code == 403
    r = client.post("/ui/logout", data={"csrf": csrf}, headers={"Origin": ORIGIN})
    assert r.status_code == 303 and 'numtune_session=""' in r.headers["set-cookie"]


def test_job_page_charts_compare_and_sweep_from_store_rows(client: TestClient) -> None:
    services = client.app.state.services  # type: ignore[attr-defined]
    a, b = submit(client, ADMIN, "a"), submit(client, ADMIN, "b")
    for job, scale in ((a, 1.0), (b, 2.0)):
        rows = [{"step": s, "loss": scale * (3 - s / 10), "ce": 2.0, "eval_ce": 1.0 / s}
                for s in range(1, 6)]  # fmt: skip
        services.jobs.add_metrics(job, 1, rows)
        finish(services, job, result={"metrics": {"eval_ce": scale}})
    services.jobs.add_log(a, 0, "step 1\nstep 5\n<script>alert(1)</script>\x1b[36mjob done\n")
    login(client, ADMIN)
    page = client.get(f"/ui/jobs/{a}").text
    assert 'data-series="CE" data-points="5"' in page
    assert 'data-series="numeric (λ·term)" data-points="5"' in page
    assert 'data-series="ce" data-points="5"' in page  # eval_ce over steps
    assert "job done" in page and "data-terminal" in page and "Cancel job" not in page
    assert "&lt;script&gt;alert(1)" in page and "<script>alert" not in page  # escaped
    assert "\x1b" not in page  # Ray's colour codes stripped
    whole = client.get(f"/ui/jobs/{a}/log")
    assert whole.headers["content-type"].startswith("text/plain") and "<script>" in whole.text
    cmp = client.get(f"/ui/compare?ids={a}&ids={b}&baseline={a}").text
    assert cmp.count('data-points="5"') == 4  # 2 runs × (loss, eval metric)
    assert "(+1)" in cmp  # b's eval_ce minus the baseline's
    rows = client.get("/ui/jobs/rows").text
    assert "ce 1" in rows and "ce 2" in rows  # best metric column
    tune = client.post("/v1/tunes", json=_tune(), headers={"Authorization": f"Bearer {ADMIN}"})
    assert tune.status_code == 202, tune.text
    tid = tune.json()["id"]
    trials = [
        {"trial_id": f"t{i}", "config": {"bandwidth": bw, "weight": w}, "best_metric": m,
         "best_checkpoint": None, "last_step": 16 if i != 2 else 4,
         "status": "completed" if i != 2 else "stopped_early"}
        for i, (bw, w, m) in enumerate([(0.5, 0.1, 1.2), (2.0, 0.5, 0.9), (8.0, 0.9, 1.5)])
    ]  # fmt: skip
    services.jobs.set_fields(tid, trials=trials)
    finish(services, tid, result={"best_trial": "t1"})
    sweep = client.get(f"/ui/sweeps/{tid}").text
    assert sweep.count('class="trial') == 3 and 'class="trial stopped"' in sweep
    assert sweep.count('class="best"') == 1 and "t1 ★" in sweep
    assert "+0.3<" in sweep and "+0.6<" in sweep  # t0 and t2 against the best trial t1
    assert tid in client.get("/ui/sweeps").text
    assert "t2" in client.get(f"/ui/compare?sweep={tid}").text


def finish(services: Any, job_id: str, **fields: Any) -> None:
    """queued → succeeded through the state machine, as the reconciler would."""
    path = ("queued", "submitted", "running", "succeeded")
    for old, new in itertools.pairwise(path):
        last = new == "succeeded"
        assert services.jobs.transition(job_id, old, new, **(fields if last else {}))


def _tune() -> dict[str, object]:
    return {
        "name": "sweep",
        "base": GOOD,
        "space": {"bandwidth": {"kind": "loguniform", "low": 0.25, "high": 16}},
        "num_samples": 3,
        "metric": "ce",
        "asha": None,  # trials are written by the test, not run
    }


def test_ui_routes_stay_out_of_the_openapi_schema(client: TestClient) -> None:
    schema = client.get("/openapi.json", headers={"Authorization": f"Bearer {ADMIN}"}).json()
    assert not [p for p in schema["paths"] if p.startswith("/ui")]


def test_log_tail_reads_only_the_newest_chunks(client: TestClient) -> None:
    services = client.app.state.services  # type: ignore[attr-defined]
    job = submit(client, ADMIN)
    offset = 0
    for i in range(100):
        text = f"line {i}\n"
        assert services.jobs.add_log(job, offset, text)
        offset += len(text)
    assert services.jobs.log_tail(job, 14) == "ine 98\nline 99\n"[-14:]
    assert services.jobs.log_tail(job, 10_000, max_chunks=3) == "line 97\nline 98\nline 99\n"
    assert services.jobs.log_tail("job-none", 100) == ""


def test_long_curves_are_thinned_but_keep_their_last_point() -> None:
    from service.platform.charts import MAX_DRAWN, Series, line_chart

    svg = str(line_chart([Series("CE", [(float(s), 1.0 / s) for s in range(1, 5001)])], "t"))
    drawn = re.search(r'points="([^"]+)"', svg)
    assert drawn and len(drawn.group(1).split()) <= MAX_DRAWN + 1
    assert 'data-points="5000"' in svg  # the count of data, not of drawn vertices
