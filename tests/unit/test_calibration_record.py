"""Issue 33: what each field of a version's calibration record means, coverage measured out
of sample (an in-sample figure would hide a calibration that does not transfer), the Wilson
interval of that coverage, and records of the old layout still read."""

from __future__ import annotations

import json

import pytest
from scipy.stats import binomtest

from jobs.calibration.conformal import calibrate, fold_ids, interval_at, widen
from jobs.calibration.record import Calibration, Observation, read_record, wilson
from jobs.infer.decoding import sample_summary
from tests.support.calibration import OLD

SAMPLES = [0.0, 1.0, 2.0, 3.0, 4.0]  # numpy's quantile Q(p) = 4p: I_t = [2 − 2t, 2 + 2t]


def obs(answer: float) -> Observation:
    return Observation(
        answer=answer, greedy=answer, expected=None, median_decoding=None, samples=SAMPLES
    )


@pytest.mark.parametrize(("hits", "n"), [(0, 10), (5, 10), (80, 100), (149, 150), (1, 1)])
def test_wilson_interval_is_scipys(hits: int, n: int) -> None:
    ci = binomtest(hits, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson(hits, n) == pytest.approx((ci.low, ci.high), abs=1e-9)
    low, high = wilson(hits, n)
    assert low <= hits / n <= high  # exactly, also at 0 and 1


def test_nested_parameter_sample_mass_and_margin_say_what_they_are() -> None:
    # Scores (t = |y − 2| / 2 inside [0, 4], 1 + the distance outside): 0.25, 0.5, 0.75, 1,
    # then 3, 4, 5 past the range. n = 7 at 50 %: the ⌈8 · 0.5⌉ = 4th smallest, t = 1.
    # At 80 %: the ⌈8 · 0.8⌉ = 7th, t = 5: the samples' range widened by 4 on each side.
    answers = [2.5, 3.0, 3.5, 4.0, 6.0, 7.0, 8.0]
    record = calibrate([obs(y) for y in answers], samples=5, temperature=1.0, period=None,
                       source="test", levels=(0.5, 0.8), folds=7)  # fmt: skip
    half, most = record.levels
    assert half.nested_parameter == pytest.approx(1.0)
    assert most.nested_parameter == pytest.approx(5.0)
    # sample_mass: the probability mass of the samples' central interval asked for; margin:
    # answer units added on each side. Together they are I_t.
    assert most.sample_mass == pytest.approx(1.0) and most.margin == pytest.approx(4.0)
    assert most.sample_mass is not None and most.margin is not None
    mean, _, sampled = sample_summary(SAMPLES, most.sample_mass)
    assert widen(sampled, mean, most.margin, None) == pytest.approx((-4.0, 8.0))
    assert interval_at(SAMPLES, 5.0, None) == pytest.approx((-4.0, 8.0))
    assert record.folds == 7 and half.calibrated is not None and most.calibrated is not None
    # One fold has no complement to fit on: nothing is measured, so nothing is calibrated.
    alone = calibrate([obs(y) for y in answers], samples=5, temperature=1.0, period=None,
                      source="test", levels=(0.5,), folds=1)  # fmt: skip
    assert alone.levels[0].nested_parameter is None and alone.levels[0].calibrated is None
    # The stored JSON names them, and no longer says "calibrated_mass"; it reads back whole.
    dumped = record.model_dump(mode="json")
    assert {"nested_parameter", "sample_mass", "margin"} <= set(dumped["levels"][1])
    assert "calibrated_mass" not in json.dumps(dumped) and dumped["layout"] == 2
    assert Calibration.model_validate(dumped) == record


def test_in_sample_coverage_hides_what_out_of_sample_coverage_shows() -> None:
    """100 questions: 90 easy (score 0.005 j, j = 1..90), 10 hard (scores 8..17). Every hard
    one sits in one cross-conformal fold with the 10 hardest easy ones, as when a calibration
    is fitted on questions unlike those it is then asked about. Fitted on all 100, t is the
    ⌈101 · 0.9⌉ = 91st score (the easiest hard one, 8): in-sample coverage 91/100 ≥ 0.90
    by construction. Out of sample: that fold's t is fitted on the 80 easiest alone (the 73rd
    of 80: 0.365) and covers none of its 20; every other fold's t (the 3rd hard score) covers
    all of its 20 easy ones: 80/100."""
    groups = fold_ids(100, 5)
    odd = [i for i, g in enumerate(groups) if g == 0]  # the 20 questions of one fold
    hard, hardest_easy = odd[:10], odd[10:]
    rest = [i for i in range(100) if i not in odd]
    answers = [0.0] * 100
    for j, i in enumerate(rest + hardest_easy, start=1):  # easy: y = 2 + 0.01 j, t = 0.005 j
        answers[i] = 2.0 + 0.01 * j
    for j, i in enumerate(hard, start=1):  # hard: y = 10 + j, t = 1 + (y − 4) = 7 + j
        answers[i] = 10.0 + j
    record = calibrate([obs(y) for y in answers], samples=5, temperature=1.0, period=None,
                       source="test", levels=(0.9,))  # fmt: skip
    [level] = record.levels
    assert record.method == "cross-conformal, 5 folds" and record.folds == 5
    assert level.nested_parameter == pytest.approx(8.0)
    assert level.in_sample_coverage == pytest.approx(0.91)
    assert level.calibrated is not None and level.calibrated.n == 100
    assert level.calibrated.coverage == pytest.approx(0.80)  # what the record reports
    ci = binomtest(80, 100).proportion_ci(method="wilson")
    assert (level.calibrated.coverage_low, level.calibrated.coverage_high) == pytest.approx(
        (ci.low, ci.high)
    )
    assert level.calibrated.coverage_high < 0.9  # and the shortfall is more than noise


def test_a_record_of_the_old_layout_still_reads() -> None:
    record = Calibration.model_validate(OLD)
    assert record.layout == 1 and record.folds is None and record.n == 150
    ninety, most = record.levels
    # calibrated_mass 19.0 was t: the samples' whole range widened by 18 on each side.
    assert most.nested_parameter == 19.0
    assert most.sample_mass == pytest.approx(1.0) and most.margin == pytest.approx(18.0)
    assert ninety.sample_mass == pytest.approx(0.97) and ninety.margin == pytest.approx(0.0)
    # Its coverage was in-sample: kept as such, and nothing out of sample is invented.
    assert most.in_sample_coverage == 0.96 and most.calibrated is None
    assert most.sampled.coverage == 0.99 and most.sampled.width_mean == 24000.0
    assert (most.sampled.coverage_low, most.sampled.coverage_high) == pytest.approx(
        wilson(round(0.99 * 150), 150)
    )
    assert most.sampled.relative_width_median is None and most.sampled.wide is None
    # Upgraded once, it reads back as itself.
    assert Calibration.model_validate(record.model_dump()) == record


def test_an_unreadable_record_is_none() -> None:
    assert read_record(None) is None and read_record({}) is None
    assert read_record({"n": "many"}) is None
    assert read_record({**OLD, "levels": [{"level": 0.9}]}) is None
    assert read_record(OLD) == Calibration.model_validate(OLD)
