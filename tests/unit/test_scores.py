"""log_error, interval_score_90 and crps (jobs/infer/scores.py) against naive reference code
written from their definitions (plain loops), and their way from a run's calibration into
the per-question records a study's bootstrap resamples."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from jobs.calibration.conformal import calibrate
from jobs.calibration.per_arm import CRPS, join_questions
from jobs.calibration.per_question import question_figures
from jobs.calibration.record import Observation
from jobs.infer.evaluate import judge, score_records
from jobs.infer.scores import crps, interval_score, log_error
from jobs.stats.bootstrap import question_values


def naive_crps(samples: list[float], y: float, period: float | None = None) -> float:
    """E|X − y| − ½ E|X − X'| over the sample set, every ordered pair, by loops."""

    def d(a: float, b: float) -> float:
        gap = abs(a - b)
        if period is None:
            return gap
        gap = gap % period
        return min(gap, period - gap)

    k = len(samples)
    first = sum(d(x, y) for x in samples) / k
    second = 0.0
    for x in samples:
        for z in samples:
            second += d(x, z)
    return first - 0.5 * second / (k * k)


def naive_winkler(lower: float, upper: float, y: float, alpha: float) -> float:
    score = upper - lower
    if y < lower:
        score += 2 / alpha * (lower - y)
    if y > upper:
        score += 2 / alpha * (y - upper)
    return score


def test_crps_matches_the_definition_on_random_sample_sets() -> None:
    rng = random.Random(7)
    for _ in range(200):
        k = rng.randint(1, 24)
        samples = [rng.choice([rng.randint(-50, 50), rng.uniform(-1e3, 1e3)]) for _ in range(k)]
        y = rng.uniform(-100, 100)
        assert crps(samples, y) == pytest.approx(naive_crps(samples, y), rel=1e-9, abs=1e-9)
        clock = [rng.uniform(0, 1440) for _ in range(k)]
        t = rng.uniform(0, 1440)
        assert crps(clock, t, 1440.0) == pytest.approx(naive_crps(clock, t, 1440.0), abs=1e-9)
    assert crps([], 3.0) is None
    assert crps([5.0], 2.0) == pytest.approx(3.0)  # one sample: the absolute error
    assert crps([4.0, 4.0, 4.0], 4.0) == 0.0  # every sample right: a perfect score


def test_interval_score_matches_winkler_by_cases() -> None:
    rng = random.Random(3)
    for _ in range(300):
        lower = rng.uniform(-100, 100)
        upper = lower + rng.uniform(0, 50)
        y = rng.uniform(-150, 150)
        want = naive_winkler(lower, upper, y, 0.1)
        assert interval_score((lower, upper), y, 0.1, None) == pytest.approx(want)
    assert interval_score((10, 20), 25, 0.1, None) == pytest.approx(10 + 20 * 5)
    # On a clock: an interval over midnight, an answer 10 minutes past its end.
    assert interval_score((1430, 10), 20, 0.1, 1440.0) == pytest.approx(20 + 20 * 10)
    with pytest.raises(ValueError, match="alpha"):
        interval_score((0, 1), 0.5, 1.0, None)


def test_log_error_per_question_and_as_a_run_metric() -> None:
    records = [judge(p, t, None) for p, t in [("12", "10"), ("7", "7"), ("x", "3"), ("1000", "1")]]
    naive = [math.log10(1 + 2), math.log10(1 + 0), math.log10(1 + 999)]  # unparsed: left out
    assert [r.log_error for r in records] == pytest.approx([naive[0], naive[1], None, naive[2]])
    assert score_records(records)["log_error"] == pytest.approx(sum(naive) / 3)
    assert log_error(None) is None
    values = question_values(records, "log_error")
    assert values is not None and np.isnan(values[2])
    assert np.nanmean(values) == pytest.approx(sum(naive) / 3)


def observations(n: int, seed: int = 0) -> list[Observation]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        y = float(rng.integers(0, 100))
        samples = [float(v) for v in y + rng.normal(0, 5, size=8).round()]
        out.append(Observation(index=2 * i, answer=y, greedy=y, expected=y,
                               median_decoding=y, samples=samples))  # fmt: skip
    return out


def test_per_question_figures_are_the_calibrated_intervals_the_record_summarises() -> None:
    obs = observations(40)
    record = calibrate(obs, samples=8, temperature=1.0, period=None, source="test")
    figures = question_figures(obs, None)
    [level] = [lv for lv in record.levels if lv.level == 0.9]
    assert level.calibrated is not None
    scores = [f.interval_score_90 for f in figures if f.interval_score_90 is not None]
    assert len(scores) == level.calibrated.with_interval
    assert sum(scores) / len(scores) == pytest.approx(level.calibrated.winkler_mean)
    for f, o in zip(figures, obs, strict=True):
        assert f.index == o.index and f.interval_90 is not None
        lo, hi = f.interval_90
        assert f.interval_score_90 == pytest.approx(naive_winkler(lo, hi, o.answer, 0.1))
        assert f.crps == pytest.approx(naive_crps(o.samples, o.answer))


def test_figures_join_a_runs_answers_by_their_place_in_the_held_out_set() -> None:
    obs = observations(5)  # indices 0, 2, 4, 6, 8
    figures = question_figures(obs, None)
    answers = [judge(str(int(o.answer)), str(int(o.answer)), None) for o in obs]
    answers = [a for pair in zip(answers, answers, strict=True) for a in pair]  # 10 questions
    joined, metrics = join_questions(answers, figures)
    assert [q.crps is not None for q in joined] == [True, False] * 5
    assert metrics[CRPS] == pytest.approx(sum(naive_crps(o.samples, o.answer) for o in obs) / 5)
    values = question_values(joined, "crps")
    assert values is not None and int(np.isnan(values).sum()) == 5
    assert question_values(answers, "crps") is None  # a run that kept no figures
    assert join_questions(answers, []) == (answers, {})
