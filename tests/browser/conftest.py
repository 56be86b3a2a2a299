"""The dashboard in real headless Chromium (Debian's, driven by Playwright) against the
real stack: the suite's shared `numtune up --dev` (Ray head, API, Serve; tests/conftest.py),
real jobs on tiny random models. One browser and one set of trained jobs are shared by the
module's tests to keep the wall time small on 2 cores.

NUMTUNE_SCREENSHOTS=<dir> also saves a PNG of each page there (docs/dashboard is made
this way) and runs a small sweep so that the Sweeps page has something to show."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Numtune, tiny_job, wait_for_job

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = os.environ.get("NUMTUNE_SCREENSHOTS")
JOB_TIMEOUT_S = 300


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `screenshots` exist only for docs' pictures (the sweep page, whose sweep
    costs minutes; tests/unit/test_web.py covers that page): deselected, not skipped, unless
    NUMTUNE_SCREENSHOTS is set."""
    if SHOTS:
        return
    dropped = [item for item in items if item.get_closest_marker("screenshots")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not item.get_closest_marker("screenshots")]


@dataclass
class Stack:
    numtune: Numtune
    http: httpx.Client
    token: str
    live: str  # a long job the tests watch while it runs, then cancel
    finished: list[str]  # two short jobs (ce, smmd), registered as arith v1 and v2
    sweep: str | None  # a tiny sweep, only when taking screenshots

    def finished_jobs(self) -> list[dict[str, Any]]:
        """Wait for the two short jobs and their registration (arith v1, v2)."""
        done = [wait_for_job(self.http, j, JOB_TIMEOUT_S) for j in self.finished]
        assert all(j["status"] == "succeeded" for j in done), done
        deadline = time.monotonic() + 60
        while len(self.http.get("/v1/models/arith").json().get("versions", [])) < 2:
            assert time.monotonic() < deadline, "arith v1/v2 never registered"
            time.sleep(0.5)
        return done


def short_job(name: str, loss: dict[str, Any]) -> dict[str, Any]:
    spec = tiny_job(name, steps=40) | {"register_as": "arith", "loss": loss}
    spec["train"] = {**spec["train"], "eval_every": 10}  # eval metrics over steps
    return spec


@pytest.fixture(scope="module")
def stack(shared_numtune: Numtune) -> Iterator[Stack]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no chromium at {CHROMIUM}: .ci/debian-deps.sh installs it")
    numtune = shared_numtune
    http = numtune.http()
    token = str(http.headers["authorization"]).removeprefix("Bearer ")
    # All submitted at once: the long one runs while the short ones queue or run beside.
    live = http.post("/v1/jobs", json=tiny_job("live", steps=2000)).json()["id"]
    finished = [
        http.post("/v1/jobs", json=short_job("base-ce", {"name": "ce"})).json()["id"],
        http.post("/v1/jobs", json=short_job("smmd", {"name": "smmd", "weight": 0.3})).json()["id"],
    ]
    sweep = None
    if SHOTS:
        from jobs.spec import load_spec_file

        tune = load_spec_file(Path(__file__).parents[2] / "examples" / "tiny-tune-smmd.yaml")
        sweep = http.post("/v1/tunes", json=tune).json()["id"]
    yield Stack(numtune, http, token, live, finished, sweep)
    http.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def page(browser: Any, stack: Stack) -> Iterator[Any]:
    """One logged-in tab for the module's tests (logging in is tested on its own)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(30_000)
    tab.goto(f"{stack.numtune.url}/ui/login")
    tab.fill("input[name=token]", stack.token)
    tab.click("button[type=submit]")
    tab.wait_for_url("**/ui/jobs")
    yield tab
    context.close()


def shot(page: Any, name: str, full_page: bool = True) -> None:
    """Save the page as docs' screenshot when NUMTUNE_SCREENSHOTS names a folder (only the
    window's worth where the whole page would be too long a picture)."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=full_page)
