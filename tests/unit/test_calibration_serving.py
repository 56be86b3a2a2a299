"""Issue 33, serving's side: `/v1/predict`'s calibration block quotes the out-of-sample
coverage with its Wilson interval and flags a wide interval; an old record is served with
a note that its coverage was never measured out of sample; `numtune predict` and `numtune
models show` print the flag."""

from __future__ import annotations

import pytest

from jobs.calibration.conformal import calibrate
from jobs.calibration.record import WIDE_NOTE, Calibration, Observation
from service.cli.calibration import summary
from service.cli.models import show_predictions
from service.serving.api import PredictRequest
from service.serving.calibration import plan
from tests.support.calibration import OLD


def record(samples: list[float], answers: list[float]) -> Calibration:
    rows = [Observation(answer=y, greedy=y, expected=None, median_decoding=None,
                        samples=samples) for y in answers]  # fmt: skip
    return calibrate(rows, samples=5, temperature=1.0, period=None, source="test",
                     levels=(0.5,), folds=8)  # fmt: skip


def ask(mass: float = 0.5) -> PredictRequest:
    return PredictRequest.model_validate(
        {"model": "m", "prompts": ["1?"], "samples": 5, "interval_mass": mass}
    )


def test_a_wide_interval_is_flagged() -> None:
    # Samples 0..4, answers 10..17: scores y − 3 = 7..14. Leaving one out, t is the 4th of
    # the other 7 scores: 11 for the four lowest (covered), 10 for the rest (not): coverage
    # 4/8. I_10 and I_11 are [0, 4] widened by 9 or 10: 22 or 24 wide around answers of at
    # most 17, so every relative width exceeds 1.29.
    wide = record([0.0, 1.0, 2.0, 3.0, 4.0], [10.0 + j for j in range(8)])
    info = plan(ask(), wide).calibration
    assert info.calibrated and info.method == "cross-conformal, 8 folds"
    assert info.measured_coverage == pytest.approx(0.5)
    assert info.measured_coverage_low is not None and info.measured_coverage_low < 0.5
    assert info.measured_coverage_high is not None and info.measured_coverage_high > 0.5
    assert info.relative_width_median is not None and info.relative_width_median > 1.29
    assert info.wide is True and info.wide_note == WIDE_NOTE
    assert info.margin is not None and info.margin >= 9.0 and info.sample_mass == 1.0


def test_a_narrow_interval_is_not_flagged() -> None:
    # Samples 100..104 and answers among them: widths ≤ 4 around answers ≥ 100.
    narrow = record([100.0, 101.0, 102.0, 103.0, 104.0], [100.5 + 0.5 * j for j in range(8)])
    info = plan(ask(), narrow).calibration
    assert info.calibrated and info.wide is False and info.wide_note is None
    assert info.relative_width_median is not None and info.relative_width_median <= 0.04


def test_an_uncalibrated_level_quotes_the_sampled_intervals_measurement() -> None:
    wide = record([0.0, 1.0, 2.0, 3.0, 4.0], [10.0 + j for j in range(8)])
    info = plan(ask(mass=0.9), wide).calibration
    assert not info.calibrated and "interval_mass=0.9" in (info.note or "")
    assert info.wide is None and info.measured_coverage is None  # 0.9 was not measured


def test_an_old_record_is_served_with_its_coverage_unmeasured() -> None:
    old = Calibration.model_validate(OLD)
    body = PredictRequest.model_validate(
        {"model": "m", "prompts": ["1?"], "samples": 16, "interval_mass": 0.95}
    )
    how = plan(body, old)
    assert how.calibration.calibrated and how.calibration.nested_parameter == 19.0
    assert how.margin == pytest.approx(18.0) and how.options["interval_mass"] == 1.0
    assert how.calibration.measured_coverage is None and how.calibration.wide is None
    assert "not measured out of sample" in (how.calibration.note or "")


def test_the_cli_prints_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    wide = record([0.0, 1.0, 2.0, 3.0, 4.0], [10.0 + j for j in range(8)])
    info = plan(ask(), wide).calibration
    reply = {"model": "m", "version": 1, "calibration": info.model_dump(), "predictions": [
        {"text": "12", "value": 12.0, "expected_value": 2.0, "std": 1.4, "interval": [-8, 12]}
    ]}  # fmt: skip
    show_predictions(reply, ["1?"], 0.5)
    assert WIDE_NOTE in capsys.readouterr().out.replace("\n", " ")
    # `models show`: levels 0.9 of a version's record (here: relabelled 0.5 → 0.9).
    dumped = wide.model_dump(mode="json")
    dumped["levels"][0]["level"] = 0.9
    line = summary(dumped)
    assert "90%: 0.00→0.50 [" in line and line.endswith(f"WIDE ({WIDE_NOTE})")
    assert summary(None) == "not calibrated"
    old = summary(Calibration.model_validate(OLD).model_dump(mode="json"))
    assert "90%: 0.98→- (not measured out of sample: recalibrate)" in old
