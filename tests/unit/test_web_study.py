"""The Study page (/ui/study) and its one click to Compare, from a small study JSON written
here (never the committed results): cells listed with Holm's verdict, the Compare table's
differences computed again by hand, unreadable files named, the login required."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from service.web.study import study_files
from tests.support.api import ADMIN, token_for
from tests.support.stub_backend import StubBackend
from tests.support.web import login

EVIL = "<script>alert(1)</script>"  # a loss label is data: it must come back escaped
EXACT = {("ce", 0): 0.10, ("ce", 1): 0.30, ("emd", 0): 0.50, ("emd", 1): 0.60, (EVIL, 0): 0.2}


def run(loss: str, seed: int) -> dict[str, Any]:
    em = EXACT[(loss, seed)]
    return {
        "part": "add", "model": "m", "task": "add", "loss": loss, "seed": seed,
        "metrics": {
            "interpolate": {"exact_match": em, "mae": 10 * (1 - em)},
            "extrapolate": {"exact_match": em / 2, "mae": None},  # NaN is written as null
        },
        "curve": [{"step": s, "exact_match": em * s / 30, "mae": 1.0} for s in (10, 20, 30)],
        "step_time_s": 0.1, "wall_s": 3.0, "final_loss": 1.0 - em, "final_ce": 0.9 - em,
    }  # fmt: skip


def summary_row(split: str, loss: str, mean: float, p_holm: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {"model": "m", "task": "add", "split": split, "loss": loss,
                           "seeds": [0, 1], "exact_match": {"mean": mean, "std": 0.05}}  # fmt: skip
    if p_holm is not None:
        row["vs_ce"] = {"exact_match": {"mean_diff": mean - 0.2, "p_holm": p_holm}}
    return row


STUDY = {
    "scale": "tiny",
    "finished": "2026-11-25 00:00 UTC",
    "runs": [run(loss, seed) for loss, seed in EXACT],
    "summary": [
        summary_row("interpolate", "ce", 0.2, None),
        summary_row("interpolate", "emd", 0.55, 0.01),
        summary_row("extrapolate", "ce", 0.1, None),
        summary_row("extrapolate", "emd", 0.275, 0.3),
        summary_row("extrapolate", EVIL, 0.1, None),
    ],
}


def app_client(tmp_path: Path, results: Path) -> TestClient:
    settings = Settings(home=tmp_path / "home", admin_token=ADMIN, study_results=str(results))
    return TestClient(
        create_app(settings, backend=StubBackend(), reconcile=False), follow_redirects=False
    )


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "accuracy-tiny.json").write_text(json.dumps(STUDY))
    (folder / "other.json").write_text("{}")  # not accuracy-*.json: not looked at
    with app_client(tmp_path, folder) as c:
        login(c, token_for(c, "reader", "read"))  # read scope is enough
        yield c


def links(text: str, kind: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(rf'class="{kind}" href="([^"]+)"', text)]


def study_row(text: str, split: str, loss: str) -> list[str]:
    """The Study table's cells for one loss of a cell, as text (the cell's own <th> out)."""
    found = re.search(rf'data-cell="m/add/{split}" data-loss="{loss}">(.*?)</tr>', text, re.S)
    assert found, (split, loss)
    tds = re.findall(r"<td[^>]*>(.*?)</td>", found.group(1), re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", td).split()) for td in tds]


def finals_row(text: str, metric: str) -> str:
    table = text[text.index('id="finals"') :]
    found = re.search(rf"<tr><th>{metric}</th>(.*?)</tr>", table, re.S)
    assert found, metric
    return found.group(1)


def test_study_lists_cells_with_means_seeds_and_holm(client: TestClient) -> None:
    page = client.get("/ui/study")
    assert page.status_code == 200
    text = page.text
    assert 'href="/ui/study"' in text  # in the nav
    for cell in ("m · add · interpolate", "m · add · extrapolate"):
        assert cell in text
    assert study_row(text, "interpolate", "emd") == [
        "emd", "0.550 ± 0.050", "2", "+0.350", "0.01", "yes", "s0 s1",
    ]  # fmt: skip
    assert study_row(text, "extrapolate", "emd")[3:6] == ["+0.075", "0.3", "no"]
    assert study_row(text, "interpolate", "ce")[1:] == [
        "0.200 ± 0.050", "2", "–", "–", "–", "s0 s1",
    ]  # fmt: skip
    assert EVIL not in text and html.escape(EVIL) in text
    assert len(links(text, "cell-link")) == 2 and "other" not in text


def test_cell_link_compares_loss_means_against_ce(client: TestClient) -> None:
    cell = links(client.get("/ui/study").text, "cell-link")[0]
    assert "split=interpolate" in cell
    view = client.get(cell)
    assert view.status_code == 200
    text = view.text
    # One overlaid held-out curve per loss (means over seeds), no empty loss chart.
    assert text.count('data-chart="line"') == 1
    assert re.findall(r'data-series="([^"]+)" data-points="3"', text) == [
        "ce/mean", "emd/mean", html.escape("<script>alert(1)</script>/mean", quote=True),
    ]  # fmt: skip
    assert "ce/mean (baseline)" in text
    ce = (EXACT[("ce", 0)] + EXACT[("ce", 1)]) / 2
    emd = (EXACT[("emd", 0)] + EXACT[("emd", 1)]) / 2
    row = finals_row(text, "eval_exact_match")
    assert f"{emd:.4g} <span" in row and f"({emd - ce:+.3g})" in row
    assert f"({(1 - emd) - (1 - ce):+.3g})" in finals_row(text, "final_loss")
    assert EVIL not in text


def test_run_link_compares_one_seed_with_ces_mean(client: TestClient) -> None:
    found = [h for h in links(client.get("/ui/study").text, "run-link") if "emd%2Fs1" in h]
    extrapolate = next(h for h in found if "split=extrapolate" in h)
    text = client.get(extrapolate).text
    ce = (EXACT[("ce", 0)] + EXACT[("ce", 1)]) / 4  # extrapolate: half the exact match
    row = finals_row(text, "eval_exact_match")
    assert f"({EXACT[('emd', 1)] / 2 - ce:+.3g})" in row
    assert len(re.findall(r"<td class=\"num\">", row)) == 2  # the baseline and the run
    assert "eval_mae" not in text  # null in every run: no row of dashes
    # A chosen baseline other than ce works like on the jobs' Compare.
    other = client.get(extrapolate.replace("baseline=ce%2Fmean", "baseline=emd%2Fs1")).text
    assert f"({ce - EXACT[('emd', 1)] / 2:+.3g})" in finals_row(other, "eval_exact_match")


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "No study results found"),
        ("{not json", "cannot be read as JSON"),
        ('{"runs": 3}', "not a study&#39;s results"),
        ('{"runs": [], "summary": [7]}', "a summary row is not an object"),
    ],
)
def test_missing_or_garbled_study_is_a_message(
    tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "accuracy-x.json"
    if content is not None:
        path.write_text(content)
    with app_client(tmp_path, path) as c:
        login(c, ADMIN)
        r = c.get("/ui/study")
        assert r.status_code == 200 and says in r.text
        assert "NUMTUNE_STUDY_RESULTS" in r.text or content is not None
        cmp = c.get("/ui/study/compare?study=accuracy-x&model=m&task=add&split=interpolate")
        assert cmp.status_code == 404 and 'class="error"' in cmp.text


def test_study_pages_need_a_login(client: TestClient) -> None:
    client.cookies.clear()
    r = client.get("/ui/study")
    assert r.status_code == 303 and r.headers["location"] == "/ui/login?next=%2Fui%2Fstudy"
    r = client.get("/ui/study/compare?study=accuracy-tiny&model=m&task=add&split=interpolate")
    assert r.status_code == 303 and r.headers["location"].startswith(
        "/ui/login?next=%2Fui%2Fstudy%2Fcompare%3Fstudy%3Daccuracy-tiny"
    )


def test_without_the_setting_no_study_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unset, the page reads nothing: never a source checkout's bench/results, wherever the
    service runs from."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    kept = tmp_path / "bench" / "results" / "accuracy-small.json"
    kept.write_text('{"runs": [], "summary": []}')
    assert study_files(None) == [] and study_files("") == []
    settings = Settings(home=tmp_path / "home", admin_token=ADMIN)
    app = create_app(settings, backend=StubBackend(), reconcile=False)
    with TestClient(app, follow_redirects=False) as c:
        login(c, ADMIN)
        page = c.get("/ui/study")
        assert page.status_code == 200 and "No study results found" in page.text
