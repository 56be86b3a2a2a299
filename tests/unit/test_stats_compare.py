"""jobs.stats.compare: hand-worked comparisons, their corrections and verdict sentences."""

from __future__ import annotations

import math

import pytest

from jobs.stats import Comparison, Footing, RunOutcome, compare


def df2_two_sided(t: float) -> float:
    # Student t with 2 degrees of freedom: P(|T| ≥ t) = 1 − t/√(t² + 2).
    return 1 - t / math.sqrt(t * t + 2)


def runs(values: dict[int, float], metric: str = "exact_match", **other: float) -> list[RunOutcome]:
    return [RunOutcome(seed=s, metrics={metric: v, **other}) for s, v in values.items()]


BASE = {0: 0.20, 1: 0.30, 2: 0.40}
# Differences +0.03, +0.05, +0.07: mean 0.05, sd 0.02, t = 0.05 / (0.02/√3) = 2.5·√3.
GAIN = {0: 0.23, 1: 0.35, 2: 0.47}
T_GAIN = 2.5 * math.sqrt(3)


EVEN = Footing(steps=400, baseline_tuned=True, baseline_rising=False)


def test_one_significant_arm_is_recommended() -> None:
    out = compare({"ce": runs(BASE), "smmd": runs(GAIN)}, secondary=(), footing=EVEN)
    test = out.arms[1].vs_ce
    assert test is not None
    assert test.diff == pytest.approx(0.05)
    assert test.p == pytest.approx(df2_two_sided(T_GAIN))  # 0.0494
    assert test.p_holm == pytest.approx(test.p)  # a family of one
    assert (test.wins, test.losses, test.ties, test.seeds) == (3, 0, 0, [0, 1, 2])
    assert out.family_size == 1
    assert out.arms[0].vs_ce is None and out.arms[0].arm == "ce"
    assert out.arms[1].verdict.startswith("`smmd`: +0.05 exact match [")
    assert "better on 3/3 seeds, p_Holm = 0.049 — recommended" in out.arms[1].verdict


def test_holm_over_the_whole_call_changes_the_verdict() -> None:
    # Two arms with the same p = 0.0494: Holm doubles the smaller, 0.099 > 0.05.
    out = compare({"ce": runs(BASE), "smmd": runs(GAIN), "emd": runs(GAIN)}, secondary=())
    p = df2_two_sided(T_GAIN)
    for arm in out.arms[1:]:
        assert arm.vs_ce is not None
        assert arm.vs_ce.p == pytest.approx(p)
        assert arm.vs_ce.p_holm == pytest.approx(2 * p)
        assert "not significant after correction" in arm.verdict
        assert "over 2 primary tests" in arm.verdict
        assert "recommended" not in arm.verdict
    assert out.family_size == 2


def test_no_effect_and_equivalence() -> None:
    # Differences 0, +0.01, −0.01: TOST at ±0.02 shows equivalence, at ±0.005 it cannot.
    near = {0: 0.20, 1: 0.31, 2: 0.39}
    shown = compare({"ce": runs(BASE), "x": runs(near)}, secondary=(), margin=0.02)
    test = shown.arms[1].vs_ce
    assert test is not None and test.equivalent is True
    assert test.p_tost == pytest.approx(df2_two_sided(0.02 / (0.01 / math.sqrt(3))) / 2)
    assert shown.arms[1].verdict.startswith("`x`: equivalent to `ce` within ±0.02 exact match")
    unshown = compare({"ce": runs(BASE), "x": runs(near)}, secondary=(), margin=0.005)
    assert unshown.arms[1].vs_ce is not None and unshown.arms[1].vs_ce.equivalent is False
    assert unshown.arms[1].verdict.startswith(
        "`x`: no detectable effect, not shown equivalent either (CI −0.02…+0.02)"
    )
    assert test.p_tost_holm == pytest.approx(test.p_tost)  # a family of one


def test_zero_variance_differences() -> None:
    same = compare({"ce": runs(BASE), "x": runs(BASE)}, secondary=())
    test = same.arms[1].vs_ce
    assert test is not None
    assert (test.p, test.p_holm, test.equivalent, test.ci, test.diff) == (None, None, None, None, 0)
    assert same.family_size == 0
    assert same.arms[1].verdict.startswith("`x`: identical exact match to `ce` on all 3 seeds")
    shifted = compare({"ce": runs(BASE), "x": runs({s: v + 0.1 for s, v in BASE.items()})})
    test = shifted.arms[1].vs_ce
    assert test is not None and test.p is None and test.diff == pytest.approx(0.1)
    assert test.wins == 3
    assert "+0.10 exact match on every one of 3 seeds (better; identical" in shifted.arms[1].verdict


def test_missing_seeds_are_left_out_and_said() -> None:
    arm = {0: 0.23, 1: 0.35, 2: 0.47, 4: 0.9}
    base = {**BASE, 3: 0.1}
    out = compare({"ce": runs(base), "x": runs(arm)}, secondary=())
    test = out.arms[1].vs_ce
    assert test is not None
    assert (test.seeds, test.unpaired_seeds, test.n) == ([0, 1, 2], [3, 4], 3)
    assert test.p == pytest.approx(df2_two_sided(T_GAIN))
    assert "seeds run by one arm only: 3, 4" in out.arms[1].verdict
    assert any("one arm only" in note for note in test.notes)
    # Per-arm means use every run of the arm, paired or not.
    assert out.arms[1].mean["exact_match"] == pytest.approx((0.23 + 0.35 + 0.47 + 0.9) / 4)


def test_fewer_than_two_pairs() -> None:
    out = compare({"ce": runs({0: 0.2, 1: 0.3}), "x": runs({1: 0.5, 2: 0.6})}, secondary=())
    test = out.arms[1].vs_ce
    assert test is not None and test.n == 1 and test.p is None
    assert "no test with fewer than 2 paired seeds" in out.arms[1].verdict
    none = compare({"ce": runs({0: 0.2}), "x": runs({1: 0.5})}, secondary=())
    assert "no seed in common with `ce`" in none.arms[1].verdict


def test_lower_is_better_primary() -> None:
    # MAE down by 3, 5, 7 on every seed: a gain, not a loss.
    base = {0: 20.0, 1: 30.0, 2: 40.0}
    arm = {0: 17.0, 1: 25.0, 2: 33.0}
    out = compare(
        {"ce": runs(base, "mae"), "x": runs(arm, "mae")}, primary="mae", secondary=(), margin=1
    )
    test = out.arms[1].vs_ce
    assert test is not None and not test.higher_is_better
    assert test.diff == pytest.approx(-5.0)
    assert (test.wins, test.losses) == (3, 0)
    assert test.p == pytest.approx(df2_two_sided(5 / (2 / math.sqrt(3))))
    assert "−5.00 MAE [" in out.arms[1].verdict and "better on 3/3 seeds" in out.arms[1].verdict


def test_secondary_metrics_use_benjamini_hochberg_over_the_call() -> None:
    other = {"mae": 10.0, "within_5pct": 0.5}
    base = [
        RunOutcome(seed=s, metrics={"exact_match": v, "mae": 10 + s, "within_5pct": 0.5 + v})
        for s, v in BASE.items()
    ]
    arm = [
        RunOutcome(seed=s, metrics={"exact_match": v, "mae": 9 + s * 0.9, "within_5pct": v})
        for s, v in GAIN.items()
    ]
    out = compare(
        {"ce": base, "x": arm, "y": runs(GAIN, **other)}, secondary=("mae", "within_5pct")
    )
    tests = [t for a in out.arms[1:] for t in a.secondary]
    assert [t.metric for t in tests] == ["mae", "within_5pct"] * 2
    raw = [t.p for t in tests]
    defined = sorted((p, i) for i, p in enumerate(raw) if p is not None)
    m = len(defined)
    assert out.secondary_family_size == m == 4
    # Step-up by hand: q_(k) = min over j ≥ k of p_(j)·m/j.
    expected: list[float] = [0.0] * len(raw)
    running = 1.0
    for rank in range(m, 0, -1):
        p, i = defined[rank - 1]
        running = min(running, p * m / rank)
        expected[i] = running
    assert [t.p_bh for t in tests] == pytest.approx(expected)
    assert out.secondary == ["mae", "within_5pct"]


def test_bad_calls_are_refused() -> None:
    with pytest.raises(ValueError, match="baseline 'ce'"):
        compare({"x": runs(BASE)})
    with pytest.raises(ValueError, match="seed 0 appears twice"):
        compare({"ce": runs(BASE), "x": [*runs(BASE), *runs({0: 0.1})]})
    with pytest.raises(ValueError, match="margin"):
        compare({"ce": runs(BASE)}, margin=0)
    with pytest.raises(ValueError, match="primary"):
        compare({"ce": runs(BASE)}, primary=[])
    with pytest.raises(ValueError, match="alpha"):
        compare({"ce": runs(BASE)}, alpha=1.5)


def test_result_is_plain_json() -> None:
    out = compare({"ce": runs(BASE), "x": runs(BASE), "y": runs(GAIN)})
    text = out.model_dump_json()
    assert "NaN" not in text
    assert Comparison.model_validate_json(text) == out
