"""Issue 19's "Must show" in a real browser: log in, a running job's curve grows, cancel
it, compare two finished runs, open an accuracy study cell on Compare, move an alias, ask
a question and see the histogram; a logged-out page redirects to login; a cross-site POST
is refused; and (issue 29) the Study page follows a live study to its verdicts."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.browser.conftest import JOB_TIMEOUT_S, Stack, shot
from tests.e2e.conftest import TERMINAL
from tests.e2e.studies import ARMS, SEEDS, STUDY_TIMEOUT_S, SharedStudy

pytestmark = [pytest.mark.ray, pytest.mark.slow]
CE_POINTS = "#live polyline[data-series='CE']"


def test_up_prints_the_dashboard_and_logged_out_pages_go_to_login(
    browser: Any, stack: Stack
) -> None:
    url = stack.numtune.url
    assert f"dashboard: {url}/ui" in stack.numtune.up_output
    context = browser.new_context()
    tab = context.new_page()
    tab.goto(f"{url}/ui/jobs/{stack.live}")
    assert "/ui/login?next=%2Fui%2Fjobs%2F" in tab.url
    shot(tab, "login")
    tab.fill("input[name=token]", "nt_not_a_token_at_all_0000")
    tab.click("button[type=submit]")
    assert tab.locator("#login-error").inner_text() == "unknown or revoked token"
    tab.fill("input[name=token]", stack.token)
    tab.click("button[type=submit]")
    tab.wait_for_url(f"**/ui/jobs/{stack.live}")  # back where it was sent from
    cookie = next(c for c in context.cookies() if c["name"] == "numtune_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]
    assert stack.token not in cookie["value"]
    # Logging out ends it: the same page goes to login again.
    tab.click("header button[type=submit]")
    tab.goto(f"{url}/ui/jobs")
    assert "/ui/login" in tab.url
    context.close()


def test_running_job_curve_grows_then_cancel(page: Any, stack: Stack) -> None:
    url = stack.numtune.url
    page.goto(f"{url}/ui/jobs")
    page.wait_for_selector(f"tr[data-job='{stack.live}']")
    page.goto(f"{url}/ui/jobs/{stack.live}")
    # Its first reports arrive after Ray Train's start; the page polls, no reload here.
    page.wait_for_selector(CE_POINTS, timeout=JOB_TIMEOUT_S * 1000)
    first = int(page.locator(CE_POINTS).get_attribute("data-points"))
    page.wait_for_function(
        "n => { const e = document.querySelector(\"#live polyline[data-series='CE']\");"
        " return e && Number(e.dataset.points) >= n + 5; }",
        arg=first,
        timeout=120_000,
    )
    assert page.locator("#job-status").inner_text() == "running"
    page.wait_for_function("() => document.querySelector('#log').textContent.length > 0")
    shot(page, "job-running")
    # The list shows it running with its latest loss, updated in place.
    page.goto(f"{url}/ui/jobs")
    row = page.locator(f"tr[data-job='{stack.live}']")
    assert row.get_attribute("data-status") == "running"
    page.goto(f"{url}/ui/jobs/{stack.live}")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel")
    page.wait_for_selector("#msg")
    # Notices are chosen by code (?msg=cancelled), never text carried in the URL.
    assert page.locator("#msg").inner_text() == "Cancelled."
    assert page.locator("#job-status").inner_text() == "cancelled"
    assert stack.http.get(f"/v1/jobs/{stack.live}").json()["status"] == "cancelled"


def test_compare_two_finished_runs(page: Any, stack: Stack) -> None:
    ce, smmd = stack.finished_jobs()
    url = stack.numtune.url
    page.goto(f"{url}/ui/compare")
    page.check(f"input[name=ids][value='{ce['id']}']")
    page.check(f"input[name=ids][value='{smmd['id']}']")
    page.check(f"input[name=baseline][value='{ce['id']}']")
    page.click("#compare")
    page.wait_for_selector("#overlay svg")
    lines = page.locator("#overlay svg[data-chart=line]").first.locator("polyline")
    assert lines.count() == 2  # one loss curve per run, overlaid
    assert all(int(lines.nth(i).get_attribute("data-points")) == 40 for i in range(2))
    header = page.locator("#finals thead").inner_text()
    assert "(baseline)" in header and "base-ce" in header and "smmd" in header
    exact = page.locator("#finals tr", has_text="eval_exact_match").inner_text()
    smmd_value = smmd["final_metrics"]["eval_exact_match"] - ce["final_metrics"]["eval_exact_match"]
    assert f"({smmd_value:+.3g})" in exact  # the difference to the baseline run
    shot(page, "compare")


def test_study_cell_opens_compare_in_one_click(page: Any, stack: Stack) -> None:
    """The accuracy study's results (the checkout's bench/results, named by the shared
    stack's NUMTUNE_STUDY_RESULTS) listed by cell; a cell's link is the Compare page of its
    losses' means."""
    page.goto(f"{stack.numtune.url}/ui/study")
    cell = page.locator("a.cell-link").first
    name = cell.inner_text()
    shot(page, "study", full_page=False)  # the whole table is a very long picture
    cell.click()
    page.wait_for_selector("#overlay svg[data-chart=line]")
    assert name in page.locator("#study-cell").inner_text()
    assert page.locator("#overlay polyline").count() >= 2  # one held-out curve per loss
    assert "ce/mean (baseline)" in page.locator("#finals thead").inner_text()
    exact = page.locator("#finals tr", has_text="eval_exact_match").inner_text()
    assert "(+" in exact or "(-" in exact  # the other losses' differences to ce's mean
    shot(page, "study-compare")


def test_move_an_alias_after_confirmation(page: Any, stack: Stack) -> None:
    stack.finished_jobs()
    r = stack.http.put("/v1/models/arith/aliases/production", json={"version": 1})
    assert r.status_code == 200
    url = stack.numtune.url
    page.goto(f"{url}/ui/models")
    assert "production → v1" in page.locator("#model-arith").inner_text()
    assert page.locator("#model-arith td.files code").count() >= 2  # files with sha256
    shot(page, "registry")
    page.fill("#model-arith input[name=alias]", "production")
    page.select_option("#model-arith select[name=version]", "2")
    page.click("#model-arith .alias-form button")
    page.wait_for_selector("#confirm")
    assert "points at v1 now" in page.locator("#confirm-text").inner_text()
    # Not moved until confirmed.
    assert stack.http.get("/v1/models/arith").json()["aliases"]["production"] == 1
    page.click("#confirm")
    page.wait_for_selector("#msg")
    assert page.locator("#msg").inner_text().startswith("The alias was moved")
    assert "production → v2" in page.locator("#model-arith").inner_text()
    assert stack.http.get("/v1/models/arith").json()["aliases"]["production"] == 2


def test_ask_shows_the_answer_and_histogram(page: Any, stack: Stack) -> None:
    stack.finished_jobs()
    url = stack.numtune.url
    page.goto(f"{url}/ui/ask")
    page.select_option("#model", "arith:2")
    # A 40-step model is barely trained: one of these questions yields numbers (seeded).
    for question in ("What is 12 + 30?", "What is 7 - 3?", "What is 41 + 9?"):
        page.fill("#question", question)
        page.fill("input[name=samples]", "32")
        page.fill("input[name=temperature]", "0.5")
        page.fill("input[name=seed]", "0")
        page.click("#ask")
        page.wait_for_selector("#answer, #ask-error", timeout=180_000)
        assert page.locator("#ask-error").count() == 0, page.locator("#ask-error").inner_text()
        if page.locator("#histogram rect.bar").count():
            break
    bars = page.locator("#histogram rect.bar")
    assert bars.count() >= 1
    counts = sum(int(bars.nth(i).get_attribute("data-count")) for i in range(bars.count()))
    shown = page.locator("#answer").inner_text()
    assert f"{counts} of 32 gave a number" in shown  # the bars hold every parsed sample
    assert "arith:2" in shown
    shot(page, "ask")


def test_cross_site_post_is_refused(page: Any, stack: Stack) -> None:
    """A page on another site posts the alias move with everything but the session: the
    browser keeps the SameSite=Strict cookie off it and the server refuses it."""
    stack.finished_jobs()
    before = stack.http.get("/v1/models/arith").json()["aliases"]
    target = 1 if before.get("production") != 1 else 2
    url = stack.numtune.url
    evil = (
        f'<form method="post" action="{url}/ui/models/arith/alias">'
        '<input name="alias" value="production">'
        f'<input name="version" value="{target}"><input name="confirmed" value="yes">'
        '<button id="go">win a prize</button></form>'
    )
    tab = page.context.new_page()
    tab.route(
        "http://evil.test/**", lambda route: route.fulfill(body=evil, content_type="text/html")
    )
    tab.goto("http://evil.test/")
    with tab.expect_navigation() as navigation:
        tab.click("#go")
    assert navigation.value.status in (401, 403)
    tab.close()
    assert stack.http.get("/v1/models/arith").json()["aliases"] == before
    page.goto(f"{url}/ui/jobs")  # by now: one cancelled, two succeeded (the docs' picture)
    page.wait_for_selector(f"tr[data-job='{stack.live}'][data-status='cancelled']")
    shot(page, "jobs")


def test_study_page_shows_a_live_study(page: Any, stack: Stack, shared_study: SharedStudy) -> None:
    """Issue 29: the Study page lists the caller's studies; a study's page follows it live,
    no reload, from its first queued runs to its verdicts. The study is the e2e test's
    (ce, smmd, emd × 2 seeds), posted once for the suite."""
    if stack.http.get(f"/v1/jobs/{stack.live}").json()["status"] not in TERMINAL:
        stack.http.post(f"/v1/jobs/{stack.live}/cancel")  # run alone: free its CPU
    study_id = shared_study.id
    url = stack.numtune.url
    page.goto(f"{url}/ui/study")
    page.click(f"tr[data-study='{study_id}'] a.study-link")
    page.wait_for_url(f"**/ui/studies/{study_id}")
    assert "running" in page.locator("#study-status").inner_text()
    assert page.locator("#study-runs tr[data-run]").count() == len(ARMS) * len(SEEDS)
    page.wait_for_selector("#study-verdicts tr[data-arm='emd']", timeout=STUDY_TIMEOUT_S * 1000)
    assert "succeeded" in page.locator("#study-status").inner_text()
    for arm in ARMS:
        assert page.locator(f"#study-curves polyline[data-series='{arm}']").count() == 1
    done = stack.http.get(f"/v1/studies/{study_id}").json()
    for arm in done["result"]["comparison"]["arms"][1:]:
        shown = page.locator(f"#study-verdicts tr[data-arm='{arm['arm']}'] td.verdict")
        assert shown.inner_text() == arm["verdict"]
    shot(page, "study-live")


@pytest.mark.screenshots
def test_sweep_page_screenshot(page: Any, stack: Stack) -> None:
    assert stack.sweep
    done = wait_for_job_kind(stack, stack.sweep)
    assert done["status"] == "succeeded", done
    page.goto(f"{stack.numtune.url}/ui/sweeps")
    shot(page, "sweeps")
    page.goto(f"{stack.numtune.url}/ui/sweeps/{stack.sweep}")
    assert page.locator("#scatter circle.trial").count() >= 1
    shot(page, "sweep")


def wait_for_job_kind(stack: Stack, tune_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 600
    while True:
        tune: dict[str, Any] = stack.http.get(f"/v1/tunes/{tune_id}").json()
        if tune["status"] in ("succeeded", "failed", "cancelled"):
            return tune
        assert time.monotonic() < deadline, tune
        time.sleep(2)
