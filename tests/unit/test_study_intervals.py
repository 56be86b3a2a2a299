"""Issue 33 in studies: each arm's calibrated 90 % interval, as every run's end-of-job
calibration measured it out of sample, is summarised per arm (coverage, relative width,
interval score, the `wide` flag) and its width and score join the secondary tests (lower is
better); runs without a calibration leave both out. Ray stubbed, as in test_studies_api."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from jobs.calibration.record import CALIBRATION_FILE, Calibration, IntervalReport, LevelReport
from service.cli.studies import render
from tests.support.api import auth, token_for
from tests.unit.test_studies_api import app_on, body, finish, metrics, one_pass, services, upload
from tests.unit.test_web import login

EXACT = {("ce", 0): 0.5, ("ce", 1): 0.6, ("ce", 2): 0.4,
         ("smmd", 0): 0.75, ("smmd", 1): 0.7, ("smmd", 2): 0.6}  # fmt: skip


def report(coverage: float, width: float, score: float) -> IntervalReport:
    return IntervalReport(n=20, coverage=coverage, coverage_low=coverage - 0.2,
                          coverage_high=min(1.0, coverage + 0.1), with_interval=20,
                          width_mean=width * 100, relative_width_mean=width,
                          relative_width_median=width, winkler_mean=score)  # fmt: skip


def checkpoint(folder: Path, coverage: float, width: float, score: float) -> str:
    """A checkpoint folder whose calibration.json says these figures at the 90 % level (the
    50 % level around it, to show which one is read)."""
    folder.mkdir(parents=True)
    levels = [
        LevelReport(level=0.5, sampled=report(0.4, 0.1, 1.0), nested_parameter=0.5,
                    calibrated=report(0.5, 0.1, 1.0)),
        LevelReport(level=0.9, sampled=report(0.7, width / 2, score * 2), nested_parameter=1.5,
                    calibrated=report(coverage, width, score)),
    ]  # fmt: skip
    record = Calibration(n=20, samples=16, temperature=1.0, period=None, source="held-out",
                         method="5-fold cross-conformal", folds=5, levels=levels,
                         estimators={}, best="greedy")  # fmt: skip
    (folder / CALIBRATION_FILE).write_text(record.model_dump_json())
    return str(folder)


def finished_study(tmp_path: Path, calibrated: bool) -> dict[str, Any]:
    with TestClient(app_on(tmp_path)) as client:
        ann = token_for(client, "ann", "submit")
        study = client.post("/v1/studies", json=body(upload(client, ann)), headers=auth(ann)).json()
        svc = services(client)
        for run in study["runs"]:
            arm, seed = run["arm"], run["seed"]
            # ce's intervals: as wide as the answers (wide), worse scores; smmd's: narrower.
            figures = (0.9, 1.4 + 0.1 * seed, 300.0 + 10 * seed) if arm == "ce" else \
                      (0.85, 0.4 + 0.05 * seed, 120.0 + 20 * seed)  # fmt: skip
            folder = tmp_path / "ckpt" / f"{arm}-{seed}"
            fields = {"best_checkpoint": checkpoint(folder, *figures)} if calibrated else {}
            finish(svc, run["job_id"], metrics(EXACT[arm, seed]), **fields)
        one_pass(svc)
        done: dict[str, Any] = client.get(f"/v1/studies/{study['id']}", headers=auth(ann)).json()
    assert done["status"] == "succeeded", done
    return done


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
