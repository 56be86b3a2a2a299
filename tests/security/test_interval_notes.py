"""Issue 45 item 12 (N10): a study whose runs have no calibrated interval says why, per arm,
instead of an empty `result.intervals` with no reason. Ray stubbed, as in
tests/unit/test_study_intervals.py, whose finished study this reuses."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from jobs.spec import JobSpec
from service.studies.interval_notes import uncalibrated_because
from tests.support.studies import finished_study
from tests.unit.api_cases import GOOD


def test_an_arm_without_a_calibrated_interval_has_a_note_saying_why(tmp_path: Path) -> None:
    result = finished_study(tmp_path, calibrated=False)["result"]
    assert result["intervals"] == {}
    notes = result["interval_notes"]
    assert set(notes) == {"ce", "smmd"}
    # The stub's runs succeeded without a checkpoint: each of the 3 seeds says so.
    assert notes["ce"] == "3 of 3 runs: kept no checkpoint to calibrate"


def test_calibrated_arms_have_no_note(tmp_path: Path) -> None:
    result = finished_study(tmp_path, calibrated=True)["result"]
    assert set(result["intervals"]) == {"ce", "smmd"} and result["interval_notes"] == {}


def test_a_checkpoint_without_a_calibration_says_whether_it_was_off(tmp_path: Path) -> None:
    def run(questions: int) -> Any:
        spec = JobSpec.model_validate(GOOD | {"calibration": {"questions": questions}})
        return SimpleNamespace(best_checkpoint=str(tmp_path), job_spec=spec)

    assert uncalibrated_because(run(0)) == "calibration is off (base.calibration.questions: 0)"
    assert "holds no calibration.json" in (uncalibrated_because(run(200)) or "")
    (tmp_path / "calibration.json").write_text("{not json")
    assert "unreadable" in (uncalibrated_because(run(200)) or "")
