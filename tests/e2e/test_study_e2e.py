"""Issue 29's "Must show", over REST on `numtune up`: a study of random:tiny-char on an
uploaded JSONL (2 arms + ce × 3 seeds, a few steps each) runs as ordinary jobs through the
queue and completes; its result carries per-arm differences, CIs, p and Holm-adjusted p,
the equivalence outcome, the verdicts, every run's provenance and per-question predictions;
another owner cannot see it; cancelling a study cancels its queued jobs.

The study is posted once for the suite (`shared_study`): the dashboard's browser test may
have followed it already."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Numtune
from tests.e2e.studies import ARMS, SEEDS, STUDY_TIMEOUT_S, SharedStudy, wait_for_study

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_a_study_compares_arms_with_paired_statistics(
    shared_numtune: Numtune, shared_study: SharedStudy
) -> None:
    study = shared_study.created
    assert len(study["runs"]) == 9 and {x["kind"] for x in study["runs"]} == {"job"}
    # A second study, cancelled at once: its queued jobs were cancelled with it.
    cancelled = shared_study.dropped
    assert cancelled.status_code == 202, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    assert len(shared_study.dropped_jobs) == 6
    for job in shared_study.dropped_jobs:
        assert job["status"] == "cancelled", job

    with shared_numtune.http() as http:
        # Another owner sees neither study.
        token = http.post("/v1/tokens", json={"owner": "bob", "scopes": ["submit"]}).json()["token"]
        bob = {"Authorization": f"Bearer {token}"}
        assert http.get(f"/v1/studies/{study['id']}", headers=bob).status_code == 404
        assert http.get("/v1/studies", headers=bob).json()["items"] == []

        done = wait_for_study(http, study["id"], STUDY_TIMEOUT_S)
        assert done["status"] == "succeeded", done
        failed = [http.get(f"/v1/jobs/{x['job_id']}").json() for x in done["runs"]
                  if x["status"] != "succeeded"]  # fmt: skip
        assert not failed and done["ended"] == 9, [(j["reason"], j["detail"]) for j in failed]
        result = done["result"]
        comparison = result["comparison"]
        assert comparison["baseline"] == "ce" and comparison["primary"] == "exact_match"
        assert [a["arm"] for a in comparison["arms"]] == ARMS
        for arm in comparison["arms"][1:]:
            test_ = arm["vs_ce"]
            assert test_["n"] == 3 and test_["seeds"] == SEEDS
            for key in ("diff", "ci", "p", "p_holm", "equivalent", "wins", "p_boot"):
                assert key in test_, (key, test_)
            assert arm["verdict"].startswith(arm["arm"]) or arm["arm"] in arm["verdict"]
            assert len(arm["runs"]) == 3
        # One chart of every arm's learning curve.
        svg = http.get(done["curves_url"])
        assert svg.headers["content-type"].startswith("image/svg+xml")
        for arm in ARMS:
            assert f'data-series="{arm}"' in svg.text
        # The CLI shows the same study.
        shown = shared_numtune.cli("study", "show", study["id"])
        assert shown.returncode == 0, shown.stderr
        assert "smmd" in shown.stdout and "p_Holm" in shown.stdout
        # Every run: its spec, provenance and per-question predictions.
        assert len(result["runs"]) == 9
        for run in result["runs"]:
            assert run["status"] == "succeeded" and run["spec"]["train"]["seed"] == run["seed"]
            assert run["provenance"], run
            assert len(run["predictions"]) == 6, run
