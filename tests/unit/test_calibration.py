"""Calibration math (jobs/calibration.py) against small examples worked out by hand, and
how serving applies a version's calibration (service/serving_calibration.py)."""

from __future__ import annotations

import pytest

from jobs.calibration import (
    calibrate,
    conformal_quantile,
    contains,
    estimator_report,
    held_out_check,
    level_report,
    sample_median,
    score,
    widen,
)
from jobs.calibration_record import Observation
from jobs.infer import Prediction
from service import errors
from service.serving_api import PredictRequest
from service.serving_calibration import choose_estimator, served

DAY = 1440.0
SAMPLES = [0.0, 1.0, 2.0, 3.0, 4.0]  # 25 % and 75 % quantiles (linear): 1 and 3


def obs(answer: float, samples: list[float] = SAMPLES, greedy: float | None = 2.0) -> Observation:
    return Observation(
        answer=answer, greedy=greedy, expected=None, median_decoding=None, samples=samples
    )


def test_conformal_quantile_is_the_ceil_n_plus_1_rank() -> None:
    scores = [10.0, -1.0, 3.0, 0.5, 2.0]  # sorted: -1, 0.5, 2, 3, 10
    assert conformal_quantile(scores, 0.5) == 2.0  # ⌈6 · 0.5⌉ = 3rd
    assert conformal_quantile(scores, 0.8) == 10.0  # ⌈6 · 0.8⌉ = 5th
    assert conformal_quantile(scores, 0.9) is None  # ⌈6 · 0.9⌉ = 6 > 5: no finite q
    assert conformal_quantile([], 0.5) is None


def test_a_hand_checked_calibration_at_mass_one_half() -> None:
    # Interval [1, 3] for every question. Scores max(lo − y, y − hi):
    # y=2: max(−1, −1) = −1; y=5: max(−4, 2) = 2; y=0: max(1, −3) = 1; y=3.5: max(−2.5, 0.5) = 0.5.
    answers = [2.0, 5.0, 0.0, 3.5]
    report = level_report([obs(y) for y in answers], 0.5, None)
    assert report.coverage == pytest.approx(1 / 4)  # only y=2 lies in [1, 3]
    assert report.width == pytest.approx(2.0)
    # n = 4: the ⌈5 · 0.5⌉ = 3rd smallest of (−1, 0.5, 1, 2) is 1: interval [0, 4].
    assert report.correction == pytest.approx(1.0)
    assert report.calibrated_coverage == pytest.approx(3 / 4)  # 2, 0, 3.5 in; 5 out
    assert report.calibrated_width == pytest.approx(4.0)


def test_a_negative_correction_narrows_but_never_past_the_midpoint() -> None:
    assert widen((1.0, 3.0), None, -0.5, None) == (1.5, 2.5)
    assert widen((1.0, 3.0), None, -5.0, None) == (2.0, 2.0)
    assert widen(None, None, 1.0, None) is None


def test_no_parsed_sample_scores_infinity_and_is_never_covered() -> None:
    assert score(None, None, 3.0, None) == float("inf")
    report = level_report([obs(2.0), obs(2.0, samples=[])], 0.5, None)
    assert report.coverage == pytest.approx(1 / 2)
    assert report.correction is None  # ⌈3 · 0.5⌉ = 2nd smallest is +inf


def test_circular_interval_across_midnight() -> None:
    # Samples 23:40, 23:50, 0:00, 0:10, 0:20: circular mean 0:00, unwrapped −20 … 20, the
    # 50 % interval [−10, 10] wrapped to (1430, 10): it spans midnight.
    clock = [1420.0, 1430.0, 0.0, 10.0, 20.0]
    assert contains((1430.0, 10.0), 1435.0, DAY) and contains((1430.0, 10.0), 5.0, DAY)
    assert not contains((1430.0, 10.0), 15.0, DAY)
    # y=1435 → −5: score max(−10 + 5, −5 − 10) = −5;  y=15: max(−25, 5) = 5;
    # y=1400 → −40: max(30, −50) = 30;  y=0: max(−10, −10) = −10.
    answers = [1435.0, 15.0, 1400.0, 0.0]
    report = level_report([obs(y, clock) for y in answers], 0.5, DAY)
    assert report.coverage == pytest.approx(2 / 4)  # 1435 and 0 inside (1430, 10)
    assert report.width == pytest.approx(20.0)
    assert report.correction == pytest.approx(5.0)  # 3rd of (−10, −5, 5, 30)
    assert widen((1430.0, 10.0), 0.0, 5.0, DAY) == (1425.0, 15.0)
    assert report.calibrated_coverage == pytest.approx(3 / 4)  # 1400 is still out
    assert report.calibrated_width == pytest.approx(30.0)
    assert widen((1430.0, 10.0), 0.0, 800.0, DAY) == (0.0, DAY)  # more than a day: all of it
    assert sample_median([1430.0, 1435.0, 10.0], DAY) == pytest.approx(1435.0)


def test_estimator_metrics_by_hand() -> None:
    # answers 10, 10, 10, 100; estimates 10, 12, none, 95: errors 0, 2, 5 over 3 answered.
    report = estimator_report([10.0, 12.0, None, 95.0], [10.0, 10.0, 10.0, 100.0], None)
    assert report.mae == pytest.approx(7 / 3)
    assert report.median_rel_error == pytest.approx(0.05)  # of 0, 0.2, 0.05
    assert report.exact_match == pytest.approx(1 / 4) and report.answered == pytest.approx(3 / 4)
    # On the circle 23:55 vs 0:05 is 10 minutes off, not 1430.
    assert estimator_report([1435.0], [5.0], DAY).mae == pytest.approx(10.0)


def test_the_best_estimator_must_answer_as_often_as_the_others() -> None:
    # greedy answers half the time but exactly; the sample mean (2.0) always, 1 off.
    rows = [obs(3.0, greedy=3.0), obs(1.0, greedy=None)]
    record = calibrate(rows, samples=5, temperature=1.0, period=None, source="test")
    assert record.estimators["greedy"].mae == 0.0 and record.estimators["mean"].mae == 1.0
    assert record.best == "mean"
    [check_row] = held_out_check(rows, record.model_copy(update={"levels": record.levels[:1]}))
    assert check_row["coverage_before"] == pytest.approx(1.0)  # 3 and 1 are the ends of [1, 3]


def prediction(interval: tuple[float, float] | None) -> Prediction:
    return Prediction(
        text="2", value=2.0, value_reason=None, expected_value=2.0, std=1.0, median=2.0,
        interval=interval, interval_mass=0.5, samples=5, parsed_samples=5, tokens=["2"],
    )  # fmt: skip


def test_serving_applies_a_matching_calibration_only() -> None:
    record = calibrate(
        [obs(y) for y in (2.0, 5.0, 0.0, 3.5)], samples=5, temperature=1.0, period=None,
        source="test",
    )  # fmt: skip
    [p], info = served([prediction((1.0, 3.0))], estimator="greedy", record=record,
                       samples=5, temperature=1.0, mass=0.5)  # fmt: skip
    assert info.calibrated and p.calibrated and info.n == 4
    assert p.interval == (0.0, 4.0) and p.sampled_interval == (1.0, 3.0)
    assert info.measured_coverage == pytest.approx(0.75)
    assert info.uncalibrated_coverage == pytest.approx(0.25)
    [p], info = served([prediction((1.0, 3.0))], estimator="mean", record=record,
                       samples=16, temperature=1.0, mass=0.5)  # fmt: skip
    assert not info.calibrated and "samples=5" in (info.note or "")
    assert p.interval == (1.0, 3.0) and p.estimate == 2.0 and not p.calibrated
    [p], info = served([prediction((1.0, 3.0))], estimator="greedy", record=None,
                       samples=5, temperature=1.0, mass=0.5)  # fmt: skip
    assert not info.calibrated and info.note == "this version has no calibration"


def test_estimate_choice_and_its_conflicts() -> None:
    assert choose_estimator(None, "median", True, 16, None) == ("median_decoding", "median")
    assert choose_estimator("auto", "greedy", False, 16, None) == ("greedy", "greedy")
    assert choose_estimator("expected", "greedy", False, 16, None) == ("expected", "expected")
    with pytest.raises(errors.InvalidRequest, match=r"^estimate: expected"):
        choose_estimator("expected", "greedy", True, 16, None)
    with pytest.raises(errors.InvalidRequest, match=r"^estimate: mean"):
        choose_estimator("mean", "greedy", False, 0, None)
    record = calibrate([obs(3.0, greedy=3.0), obs(1.0, greedy=None)], samples=5,
                       temperature=1.0, period=None, source="test")  # fmt: skip
    assert choose_estimator("auto", "greedy", False, 5, record) == ("mean", "greedy")
    assert choose_estimator("auto", "greedy", False, 0, record) == ("greedy", "greedy")
    with pytest.raises(ValueError, match="estimate"):
        PredictRequest.model_validate({"model": "m", "prompts": ["1?"], "estimate": "mode"})
