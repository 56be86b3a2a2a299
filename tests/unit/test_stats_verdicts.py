"""Verdicts that say what they rest on, several primary metrics under one Holm family, TOST
corrected over that family, and exploratory tests outside any correction (jobs.stats)."""

from __future__ import annotations

import math

import pytest

from jobs.stats import Footing, RunOutcome, compare, holm
from jobs.stats.footing import still_rising

BASE = {0: 0.20, 1: 0.30, 2: 0.40, 3: 0.50}
GAIN = {0: 0.31, 1: 0.40, 2: 0.52, 3: 0.60}  # +0.11, +0.10, +0.12, +0.10: p ≈ 0.0002
HARM = {s: v - d for (s, v), d in zip(BASE.items(), (0.11, 0.10, 0.12, 0.10), strict=True)}


def runs(values: dict[int, float], **metrics: dict[int, float]) -> list[RunOutcome]:
    return [
        RunOutcome(seed=s, metrics={"exact_match": v, **{m: d[s] for m, d in metrics.items()}})
        for s, v in values.items()
    ]


def test_an_untuned_ce_gets_no_recommendation_and_the_verdict_names_why() -> None:
    arms = {"ce": runs(BASE), "smmd": runs(GAIN)}
    untuned = Footing(steps=400, baseline_tuned=False, baseline_rising=True,
                      rising_detail="0.30 at step 320, 0.35 at 400")  # fmt: skip
    verdict = compare(arms, secondary=(), footing=untuned).arms[1].verdict
    assert "recommended" not in verdict
    assert verdict.endswith(
        "— better than `ce` at 400 steps; `ce`'s learning rate not tuned; "
        "`ce` still rising (0.30 at step 320, 0.35 at 400)"
    )
    rising = Footing(steps=400, baseline_tuned=True, baseline_rising=True)
    verdict = compare(arms, secondary=(), footing=rising).arms[1].verdict
    assert "recommended" not in verdict and "`ce` still rising" in verdict
    assert "learning rate not tuned" not in verdict
    unknown = compare(arms, secondary=()).arms[1].verdict  # no footing given: nothing assumed
    assert "recommended" not in unknown and "not measured" in unknown
    even = Footing(steps=400, baseline_tuned=True, baseline_rising=False)
    assert compare(arms, secondary=(), footing=even).arms[1].verdict.endswith("— recommended")


def test_a_significant_harm_reads_as_worse_whatever_the_footing() -> None:
    even = Footing(steps=400, baseline_tuned=True, baseline_rising=False)
    out = compare({"ce": runs(BASE), "bad": runs(HARM)}, secondary=(), footing=even)
    test = out.arms[1].vs_ce
    assert test is not None and test.p_holm is not None and test.p_holm < 0.05
    assert "worse on 4/4 seeds" in out.arms[1].verdict
    assert out.arms[1].verdict.endswith("— worse than `ce`")
    assert "recommended" not in out.arms[1].verdict


def test_several_primaries_share_one_holm_family_over_metrics_and_arms() -> None:
    mae_base = {0: 20.0, 1: 30.0, 2: 40.0, 3: 50.0}
    mae_gain = {0: 17.0, 1: 28.0, 2: 33.0, 3: 45.0}
    arms = {
        "ce": runs(BASE, mae=mae_base),
        "x": runs(GAIN, mae=mae_gain),
        "y": runs({s: v + 0.01 * (s % 2) for s, v in BASE.items()}, mae=mae_base),
    }
    out = compare(arms, primary=["exact_match", "mae"], secondary=(), margin={"exact_match": 0.02})
    assert out.primaries == ["exact_match", "mae"] and out.primary == "exact_match"
    tests = [t for a in out.arms[1:] for t in a.primary_tests]
    assert [t.metric for t in tests] == ["exact_match", "mae"] * 2
    raw = [t.p for t in tests]
    assert [t.p_holm for t in tests] == pytest.approx(holm(raw))
    assert out.family_size == sum(p is not None for p in raw) == 3  # y's MAE: zero variance
    # A primary without a margin has no TOST; the one with it is corrected over the family.
    assert all(t.margin is None and t.p_tost is None for t in tests if t.metric == "mae")
    x = out.arms[1]
    assert x.vs_ce == x.primary_tests[0]
    assert "exact match [" in x.verdict and "MAE [" in x.verdict


def test_tost_is_holm_corrected_over_the_family() -> None:
    # Two arms each within ±0.02 of ce: alone each TOST p is below 0.05, over two it is not.
    near = {0: 0.208, 1: 0.284, 2: 0.416, 3: 0.492}  # TOST p 0.036 alone
    also = {0: 0.192, 1: 0.316, 2: 0.384, 3: 0.508}
    out = compare({"ce": runs(BASE), "a": runs(near), "b": runs(also)}, secondary=(), margin=0.02)
    tests = [a.vs_ce for a in out.arms[1:]]
    assert all(t is not None and t.p_tost is not None for t in tests)
    raw = [t.p_tost for t in tests if t is not None and t.p_tost is not None]
    corrected = holm(raw)
    assert [t.p_tost_holm for t in tests if t is not None] == pytest.approx(corrected)
    for t, p in zip(tests, corrected, strict=True):
        assert t is not None and p is not None
        assert t.equivalent is (p < 0.05)
    # The case the correction exists for: shown alone, not over the family.
    assert max(raw) < 0.05 and not any(t is not None and t.equivalent for t in tests)
    assert "equivalent to" not in out.arms[1].verdict


def test_exploratory_metrics_keep_their_raw_p_outside_every_family() -> None:
    within = {0: 0.5, 1: 0.6, 2: 0.7, 3: 0.8}
    better = {s: v + 0.1 + 0.01 * s for s, v in within.items()}
    arms = {"ce": runs(BASE, within_1pct=within), "x": runs(GAIN, within_1pct=better)}
    out = compare(arms, secondary=(), exploratory=["within_1pct", "exact_match"])
    assert out.exploratory == ["within_1pct"]  # a primary is never also exploratory
    [test] = out.arms[1].exploratory
    assert test.metric == "within_1pct" and test.p is not None and not math.isnan(test.p)
    assert "p_bh" not in test.model_dump() and "p_holm" not in test.model_dump()
    assert out.family_size == 1 and out.secondary_family_size == 0


def test_still_rising_compares_the_last_step_with_the_one_at_80_percent() -> None:
    climbing = [{100: 0.02, 200: 0.03, 300: 0.04, 400: 0.08},
                {100: 0.0, 200: 0.0, 300: 0.05, 400: 0.08}]  # fmt: skip
    rising, detail = still_rising(climbing, "exact_match", True)
    assert rising is True and detail == "exact match 0.04 at step 300, 0.08 at step 400"
    flat = [{100: 0.3, 300: 0.5, 400: 0.505}]  # half a point: levelled
    assert still_rising(flat, "exact_match", True)[0] is False
    # An error falling by more than 1 % of itself is still improving; rising MAE is not.
    assert still_rising([{10: 50.0, 40: 40.0, 50: 39.0}], "mae", False)[0] is True
    assert still_rising([{10: 50.0, 40: 40.0, 50: 41.0}], "mae", False)[0] is False
    assert still_rising([{50: 0.1}], "exact_match", True) == (None, None)  # no earlier step
    assert still_rising([], "exact_match", True) == (None, None)
