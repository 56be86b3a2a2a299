"""A study's verdicts over REST say what they rest on: no "recommended" while ce's learning
rate was not tuned or ce was still rising; a harm that survives Holm reads "worse"; several
primary metrics share one Holm family; the declared secondary family is the BH family and
every other measured figure is exploratory. Ray stubbed, as in test_studies_api."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.records.models import MetricsRow
from jobs.records.run_files import RunFiles
from service.cli.studies import render
from tests.support.api import auth, token_for
from tests.support.studies import app_on, body, finish, one_pass, services, upload

CE = {0: 0.40, 1: 0.50, 2: 0.60}


def scores(em: float, mae: float) -> dict[str, Any]:
    return {"metrics": {"eval_exact_match": em, "eval_mae": mae, "eval_within_5pct": em / 2}}


def run_study(tmp_path: Path, shift: dict[int, float], **spec: Any) -> dict[str, Any]:
    """A finished study: ce at CE, smmd at CE + shift; ce's curve climbs 0.1 → its score
    over steps 1-4 (still rising at the end)."""
    with TestClient(app_on(tmp_path)) as client:
        ann = token_for(client, "ann", "submit")
        sent = body(upload(client, ann), **spec)
        r = client.post("/v1/studies", json=sent, headers=auth(ann))
        assert r.status_code == 202, r.text
        svc = services(client)
        for run in r.json()["runs"]:
            seed = run["seed"]
            em = CE[seed] + (shift[seed] if run["arm"] == "smmd" else 0.0)
            finish(svc, run["job_id"], scores(em, 10 * (1 - em) + seed))
            files = RunFiles.for_job(run["job_id"], svc.settings.storage_root)
            curve = [0.1, 0.2, 0.3, em] if run["arm"] == "ce" else [em] * 4
            files.append_metrics([MetricsRow(step=s + 1, eval_exact_match=v)
                                  for s, v in enumerate(curve)])  # fmt: skip
        one_pass(svc)
        done: dict[str, Any] = client.get(f"/v1/studies/{r.json()['id']}", headers=auth(ann)).json()
    assert done["status"] == "succeeded", done
    return done


def smmd(done: dict[str, Any]) -> dict[str, Any]:
    arms = done["result"]["comparison"]["arms"]
    found: dict[str, Any] = next(a for a in arms if a["arm"] == "smmd")
    return found


def test_a_gain_over_an_untuned_rising_ce_is_not_recommended(tmp_path: Path) -> None:
    done = run_study(tmp_path, {0: 0.25, 1: 0.26, 2: 0.24})
    arm = smmd(done)
    assert arm["vs_ce"]["p_holm"] < 0.05
    assert "recommended" not in arm["verdict"]
    assert arm["verdict"].endswith(
        "— better than `ce` at 4 steps; `ce`'s learning rate not tuned; "
        "`ce` still rising (exact match 0.30 at step 3, 0.50 at step 4)"
    )
    footing = done["result"]["comparison"]["footing"]
    assert footing == {"steps": 4, "baseline_tuned": False, "baseline_rising": True,
                       "rising_detail": "exact match 0.30 at step 3, 0.50 at step 4"}  # fmt: skip


def test_a_significant_harm_reads_as_worse_in_the_service(tmp_path: Path) -> None:
    arm = smmd(run_study(tmp_path, {0: -0.25, 1: -0.26, 2: -0.24}))
    assert arm["vs_ce"]["p_holm"] < 0.05
    assert "worse on 3/3 seeds" in arm["verdict"] and arm["verdict"].endswith("— worse than `ce`")


def test_several_primaries_one_family_and_the_declared_secondaries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = run_study(
        tmp_path,
        {0: 0.25, 1: 0.26, 2: 0.24},
        primary_metric=["exact_match", "mae"],
        secondary_metrics=[],
        equivalence_margin={"exact_match": 0.02, "mae": 0.5},
    )
    comparison = done["result"]["comparison"]
    assert done["primary_metric"] == "exact_match"  # the first: the old field keeps its type
    assert done["primary_metrics"] == comparison["primaries"] == ["exact_match", "mae"]
    assert comparison["family_size"] == 2 and comparison["secondary"] == []
    arm = smmd(done)
    assert [t["metric"] for t in arm["primary_tests"]] == ["exact_match", "mae"]
    # Declared out of the secondary family, a measured figure is exploratory: raw p only.
    assert comparison["exploratory"] == ["within_5pct"] and arm["secondary"] == []
    [loose] = arm["exploratory"]
    assert loose["p"] is not None and "p_bh" not in loose
    render(done)
    shown = capsys.readouterr().out
    assert "smmd, exploratory (raw p, no correction): within_5pct +0.125" in shown
    assert shown.count("│ smmd ") == 2  # one row per primary metric
    # Left undeclared, the measured figures outside the primaries fall to the default family.
    plain = run_study(tmp_path / "again", {0: 0.25, 1: 0.26, 2: 0.24})["result"]["comparison"]
    assert plain["secondary"] == ["mae", "within_5pct"] and plain["exploratory"] == []


def test_bad_metric_families_are_422s_naming_the_field(tmp_path: Path) -> None:
    with TestClient(app_on(tmp_path)) as client:
        ann = token_for(client, "ann", "submit")
        file_id = upload(client, ann)
        for over, field in (
            ({"primary_metric": ["mae", "mae"]}, "primary_metric"),
            ({"primary_metric": "log_errors"}, "primary_metric"),
            ({"secondary_metrics": ["exact_match"]}, "secondary_metrics"),
            ({"equivalence_margin": {"crps": 1.0}}, "equivalence_margin"),
        ):
            r = client.post("/v1/studies", json=body(file_id, **over), headers=auth(ann))
            assert r.status_code == 422 and field in r.text, (over, r.text)
        assert client.get("/v1/studies", headers=auth(ann)).json()["items"] == []
