"""Calibration math (jobs/calibration/conformal.py) against small examples worked out by hand, and
how serving applies a version's calibration (service/serving/calibration.py)."""

from __future__ import annotations

import pytest

from jobs.calibration.conformal import (
    calibrate,
    conformal_quantile,
    estimator_report,
    fold_ids,
    interval_at,
    level_report,
    score,
    widen,
)
from jobs.calibration.intervals import contains
from jobs.calibration.record import Observation
from jobs.infer import Prediction
from jobs.infer.decoding import sample_median
from service import errors
from service.serving.api import PredictRequest, samples_used_for
from service.serving.calibration import choose_estimator, plan, served

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


def test_scores_are_the_smallest_mass_whose_interval_holds_the_answer() -> None:
    # K = 5 samples 0..4: numpy's quantile Q(p) is linear through (i/4, i).
    assert score(SAMPLES, 2.0, None) == 0.0  # the median: inside every I_t
    assert score(SAMPLES, 3.5, None) == pytest.approx(0.75)  # Q(0.875) = 3.5: t = 2·0.875 − 1
    assert score(SAMPLES, 0.0, None) == pytest.approx(1.0)  # the smallest sample: the range
    assert score(SAMPLES, 5.0, None) == pytest.approx(2.0)  # 1 past the range: 1 + 1
    assert score([2.0, 2.0, 2.0, 3.0, 3.0], 2.0, None) == 0.0  # Q(0.5) = 2
    assert score([], 2.0, None) == float("inf")


def test_a_hand_checked_calibration_at_mass_one_half() -> None:
    # Scores (test above): y=2 → 0, y=5 → 2, y=0 → 1, y=3.5 → 0.75.
    answers = [2.0, 5.0, 0.0, 3.5]
    report = level_report([obs(y) for y in answers], 0.5, None, groups=[0, 1, 2, 3])
    # Nominal 50 %: [Q(0.25), Q(0.75)] = [1, 3] holds only y=2.
    assert report.sampled.coverage == pytest.approx(1 / 4)
    assert report.sampled.width_mean == pytest.approx(2.0)
    # n = 4: the ⌈5 · 0.5⌉ = 3rd smallest of (0, 0.75, 1, 2) is t = 1: the range [0, 4],
    # which holds 2, 0 and 3.5 of the questions it was fitted on.
    assert report.nested_parameter == pytest.approx(1.0)
    assert report.in_sample_coverage == pytest.approx(3 / 4)
    assert interval_at(SAMPLES, 2.0, None) == pytest.approx((-1.0, 5.0))  # t = 1 + 1
    # Leave one out (4 groups): t is the ⌈4 · 0.5⌉ = 2nd smallest of the other 3 scores:
    # y=2: 1 (covered, [0, 4]); y=5: 0.75 ([0.5, 3.5], out); y=0: 0.75 (out); y=3.5: 1 (in).
    out = report.calibrated
    assert out is not None and out.n == 4 and out.with_interval == 4
    assert out.coverage == pytest.approx(2 / 4)  # not the in-sample 3/4
    assert out.width_mean == pytest.approx((4 + 3 + 3 + 4) / 4)
    # width / max(|y|, 1): 4/2, 3/5, 3/1, 4/3.5.
    assert out.relative_width_mean == pytest.approx((2 + 0.6 + 3 + 4 / 3.5) / 4)
    assert out.relative_width_median == pytest.approx((4 / 3.5 + 2) / 2)
    # Winkler at 50 %: width + 4 × miss: 4, 3 + 4 · 1.5, 3 + 4 · 0.5, 4.
    assert out.winkler_mean == pytest.approx((4 + 9 + 5 + 4) / 4)
    assert out.wide  # median 1.57 × the answer
    # The sampled [1, 3]: relative widths 1, 0.4, 2, 0.57: median 0.79, not wide.
    assert report.sampled.relative_width_median == pytest.approx((2 / 3.5 + 1) / 2)
    assert report.sampled.winkler_mean == pytest.approx((2 + 10 + 6 + 4) / 4)
    assert report.sampled.wide is False


def test_folds_are_balanced_seeded_and_never_more_than_the_questions() -> None:
    groups = fold_ids(12, 5)
    assert sorted(groups.count(g) for g in set(groups)) == [2, 2, 2, 3, 3]
    assert groups == fold_ids(12, 5)  # the same questions always fall the same way
    assert sorted(fold_ids(3, 5)) == [0, 1, 2]
    assert fold_ids(1, 5) == [0]


def test_a_level_not_measurable_out_of_sample_is_not_calibrated() -> None:
    # n = 4 at 80 %: ⌈5 · 0.8⌉ = 4 ≤ 4 fits t on all four, but each fold's complement
    # (3 questions) needs rank ⌈4 · 0.8⌉ = 4 > 3: nothing is served unmeasured.
    report = level_report([obs(y) for y in (2.0, 5.0, 0.0, 3.5)], 0.8, None, [0, 1, 2, 3])
    assert report.nested_parameter is None and report.calibrated is None
    assert report.sample_mass is None and report.margin is None
    assert report.sampled.coverage == pytest.approx(2 / 4)  # [Q(0.1), Q(0.9)] = [0.4, 3.6]


def test_widening_never_narrows_past_the_midpoint() -> None:
    assert widen((1.0, 3.0), None, 0.5, None) == (0.5, 3.5)
    assert widen((1.0, 3.0), None, -5.0, None) == (2.0, 2.0)
    assert widen(None, None, 1.0, None) is None


def test_no_parsed_sample_is_never_covered() -> None:
    report = level_report([obs(2.0), obs(2.0, samples=[])], 0.5, None, [0, 1])
    assert report.sampled.coverage == pytest.approx(1 / 2)
    assert report.sampled.with_interval == 1 and report.sampled.width_mean == pytest.approx(2.0)
    assert report.nested_parameter is None  # ⌈3 · 0.5⌉ = 2nd smallest is +inf


def test_circular_interval_across_midnight() -> None:
    # Samples 23:40, 23:50, 0:00, 0:10, 0:20: circular mean 0:00, unwrapped −20 … 20, the
    # 50 % interval [−10, 10] wrapped to (1430, 10): it spans midnight.
    clock = [1420.0, 1430.0, 0.0, 10.0, 20.0]
    assert contains((1430.0, 10.0), 1435.0, DAY) and contains((1430.0, 10.0), 5.0, DAY)
    assert not contains((1430.0, 10.0), 15.0, DAY)
    # y=1435 → −5 = Q(0.375): t = 1 − 0.75 = 0.25;  y=15 = Q(0.875): t = 0.75;
    # y=1400 → −40, 20 below the range: t = 21;  y=0: the median, t = 0.
    answers = [1435.0, 15.0, 1400.0, 0.0]
    assert [score(clock, y, DAY) for y in answers] == pytest.approx([0.25, 0.75, 21.0, 0.0])
    report = level_report([obs(y, clock) for y in answers], 0.5, DAY, [0, 0, 1, 1])
    assert report.sampled.coverage == pytest.approx(2 / 4)  # 1435 and 0 inside (1430, 10)
    assert report.sampled.width_mean == pytest.approx(20.0)
    assert report.sampled.relative_width_median == pytest.approx(20.0 / DAY)  # of a day
    # Winkler at 50 %: 20 + 4 × the miss (5 for 15; 30 for 1400, to 1430) outside.
    assert report.sampled.winkler_mean == pytest.approx((20 + 40 + 140 + 20) / 4)
    assert report.nested_parameter == pytest.approx(0.75)  # 3rd of (0, 0.25, 0.75, 21)
    # I_0.75 = [Q(0.125), Q(0.875)] = [−15, 15] → (1425, 15), still across midnight.
    assert interval_at(clock, 0.75, DAY) == pytest.approx((1425.0, 15.0))
    assert report.in_sample_coverage == pytest.approx(3 / 4)  # 1400 is still out
    # Two groups: {1435, 15} fitted on (21, 0): ⌈3 · 0.5⌉ = 2nd is 21, [−40, 40],
    # covers both; {1400, 0} fitted on (0.25, 0.75): t = 0.75 covers 0, not 1400.
    assert report.calibrated is not None
    assert report.calibrated.coverage == pytest.approx(3 / 4)
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
    assert record.levels[0].sampled.coverage == pytest.approx(1.0)  # 3 and 1: ends of [1, 3]


def prediction(interval: tuple[float, float] | None) -> Prediction:
    return Prediction(
        text="2", value=2.0, value_reason=None, expected_value=2.0, std=1.0, median=2.0,
        interval=interval, interval_mass=0.5, samples=5, parsed_samples=5, tokens=["2"],
    )  # fmt: skip


def request(**fields: object) -> PredictRequest:
    return PredictRequest.model_validate({"model": "m", "prompts": ["1?"], **fields})


def test_serving_applies_a_matching_calibration_only() -> None:
    record = calibrate(
        [obs(y) for y in (2.0, 5.0, 0.0, 3.5)], samples=5, temperature=1.0, period=None,
        source="test",
    )  # fmt: skip
    how = plan(request(samples=5, interval_mass=0.5, estimate="mean"), record)
    assert how.calibration.calibrated and how.calibration.n == 4
    assert how.options["interval_mass"] == pytest.approx(1.0)  # t = 1: ask for the range
    # Out of sample (4 questions, one per fold): 2 of 4, as worked out by hand above.
    assert how.calibration.measured_coverage == pytest.approx(0.5)
    assert how.calibration.nested_parameter == pytest.approx(1.0)
    assert how.calibration.uncalibrated_coverage == pytest.approx(0.25)
    [p] = served([prediction((0.0, 4.0))], how)
    assert p.calibrated and p.interval == pytest.approx((0.0, 4.0), abs=1e-6)
    assert p.interval_mass == 0.5  # the nominal mass, as asked
    assert p.estimate == 2.0 and p.estimator == "mean"
    how = plan(request(samples=16, interval_mass=0.5), record)
    assert not how.calibration.calibrated and "samples=5" in (how.calibration.note or "")
    assert how.options["interval_mass"] == 0.5
    how = plan(request(samples=5, interval_mass=0.7), record)
    assert not how.calibration.calibrated and "0.7" in (how.calibration.note or "")
    how = plan(request(samples=5, interval_mass=0.5), None)
    assert how.calibration.note == "this version has no calibration"
    [p] = served([prediction((1.0, 3.0))], how)
    assert not p.calibrated and p.interval == (1.0, 3.0) and p.estimator == "greedy"


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
        request(estimate="mode")


def test_the_response_says_what_k_was_spent_on() -> None:
    body = PredictRequest(model="m:1", prompts=["q"], samples=8, estimate="expected")
    how = plan(body, None)
    note = samples_used_for(body.samples, how.options["decoding"])
    assert how.options["decoding"] == "expected"
    assert note.startswith("8 sampled completions per prompt") and "draws no samples" in note
    assert "none drawn" in samples_used_for(0, "greedy")
