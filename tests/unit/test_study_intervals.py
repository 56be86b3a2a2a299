"""Issue 33 in studies: each arm's calibrated 90 % interval, as every run's end-of-job
calibration measured it out of sample, is summarised per arm (coverage, relative width,
interval score, the `wide` flag) and its width and score join the secondary tests (lower is
better); runs without a calibration leave both out. Ray stubbed, as in test_studies_api."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.cli.studies import render
from tests.support.api import token_for
from tests.support.studies import app_on, finished_study
from tests.support.web import login


def test_each_arm_reports_its_out_of_sample_interval(tmp_path: Path) -> None:
    result = finished_study(tmp_path, calibrated=True)["result"]
    ce, smmd = result["intervals"]["ce"], result["intervals"]["smmd"]
    assert (ce["level"], ce["runs"], smmd["runs"]) == (0.9, 3, 3)
    assert ce["coverage"] == pytest.approx(0.9) and smmd["coverage"] == pytest.approx(0.85)
    assert ce["relative_width_median"] == pytest.approx(1.5)  # mean of 1.4, 1.5, 1.6
    assert smmd["winkler_mean"] == pytest.approx(140.0)  # mean of 120, 140, 160
    assert ce["wide"] is True and smmd["wide"] is False

    smmd_arm = next(a for a in result["comparison"]["arms"] if a["arm"] == "smmd")
    tests = {t["metric"]: t for t in smmd_arm["secondary"]}
    score = tests["interval_score_90"]
    # Paired differences 120-300, 140-310, 160-320: -180, -170, -160; lower is better.
    assert score["diff"] == pytest.approx(-170.0)
    assert score["higher_is_better"] is False and score["wins"] == 3
    assert score["p_bh"] is not None
    assert tests["interval_width_90"]["diff"] == pytest.approx(0.45 - 1.5)  # 0.4, 0.45, 0.5


def test_runs_without_a_calibration_leave_intervals_out(tmp_path: Path) -> None:
    result = finished_study(tmp_path, calibrated=False)["result"]
    assert result["intervals"] == {}
    smmd_arm = next(a for a in result["comparison"]["arms"] if a["arm"] == "smmd")
    # The default secondary family keeps what the runs measured: no interval, no CRPS.
    assert {t["metric"] for t in smmd_arm["secondary"]} == {"mae", "within_5pct"}


def test_the_dashboard_shows_each_arms_interval_and_flags_a_wide_one(tmp_path: Path) -> None:
    study = finished_study(tmp_path, calibrated=True)
    with TestClient(app_on(tmp_path), follow_redirects=False) as client:
        login(client, token_for(client, "ann", "read"))
        page = client.get(f"/ui/studies/{study['id']}/live").text
    table = page.split('id="study-intervals"')[1].split("</table>")[0]
    ce, smmd = table.split('<tr data-arm="ce">')[1], table.split('<tr data-arm="smmd">')[1]
    assert "0.900" in ce and "wide: treat as a range" in ce.split("</tr>")[0]
    assert "0.850" in smmd and "wide" not in smmd.split("</tr>")[0]


def test_the_cli_prints_each_arms_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    render(finished_study(tmp_path, calibrated=True))
    shown = capsys.readouterr().out
    ce = next(line for line in shown.splitlines() if line.startswith("- ce: 90% interval"))
    assert "coverage 0.900" in ce and "median width 1.5 × |answer|" in ce and "wide" in ce
    smmd = next(line for line in shown.splitlines() if line.startswith("- smmd: 90% interval"))
    assert "interval score 140" in smmd and "wide" not in smmd
