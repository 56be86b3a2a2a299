"""jobs.stats.power against simulation: simulated studies with per-question outcomes (exact
match: each question's paired difference is −1, 0 or +1) and a seed effect, judged by the
study's own test (two-sided paired t over seeds at alpha / family), reject as often as the
stated power says; and the inverses (seeds, questions needed) are the smallest that reach it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from jobs.stats import paired_t
from jobs.stats.power import (
    Spread,
    detectable_effect,
    estimate_spread,
    level,
    power,
    questions_needed,
    rules_out,
    seed_sd_upper,
    seeds_needed,
)

SIMS = 4000  # ±3 points is ~4.7 standard errors of a simulated power near 0.8


def simulate(
    effect: float,
    seed_sd: float,
    discordant: float,
    seeds: int,
    questions: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """[SIMS, seeds] per-seed mean paired differences of simulated studies.

    Seed s shifts the expected difference by u_s ~ N(0, seed_sd²); on each question the
    pair differs with probability `discordant`, +1 or −1 so that E = effect + u_s. Counts of
    +1 / 0 / −1 per (study, seed) are one multinomial draw: the exact sum of `questions`
    independent per-question outcomes."""
    shift = np.clip(effect + rng.normal(0, seed_sd, (SIMS, seeds)), -discordant, discordant)
    probs = np.stack(
        [(discordant + shift) / 2, 1 - discordant + 0 * shift, (discordant - shift) / 2], -1
    )
    counts = rng.multinomial(questions, probs)  # [SIMS, seeds, 3]
    return np.asarray((counts[..., 0] - counts[..., 2]) / questions)


def rejected(diffs: np.ndarray, alpha: float, family: int) -> float:
    """Share of simulated studies whose paired t over seeds rejects at alpha / family."""
    p = stats.ttest_1samp(diffs, 0.0, axis=1).pvalue
    return float(np.mean(p < level(alpha, family)))


def question_sd(effect: float, seed_sd: float, discordant: float) -> float:
    """SD of one question's difference around its seed's mean: E_u[r − (δ + u)²]."""
    return math.sqrt(discordant - effect**2 - seed_sd**2)


@pytest.mark.parametrize(
    ("seed_sd", "discordant", "seeds", "questions", "family", "effect"),
    [
        (0.0, 0.13, 10, 1000, 1, None),  # word problems at 1,000 questions: at the MDE
        (0.035, 0.4, 5, 150, 3, None),  # a seed part as on unit conversions, 3 arms: MDE
        (0.02, 0.2, 8, 300, 2, 0.03),  # a fixed effect, power well below 0.8
    ],
)
def test_stated_power_matches_simulated_studies(
    seed_sd: float, discordant: float, seeds: int, questions: int, family: int, effect: float | None
) -> None:
    rng = np.random.default_rng(7)
    spread = Spread(seed_sd, question_sd(effect or 0.05, seed_sd, discordant))
    if effect is None:
        effect = detectable_effect(spread, seeds, questions, family=family)
        spread = Spread(seed_sd, question_sd(effect, seed_sd, discordant))
        effect = detectable_effect(spread, seeds, questions, family=family)
    stated = power(effect, spread, seeds, questions, family=family)
    diffs = simulate(effect, seed_sd, discordant, seeds, questions, rng)
    simulated = rejected(diffs, 0.05, family)
    assert abs(stated - simulated) <= 0.03, (stated, simulated)
    # A loss of the same size is detected as often (two-sided).
    worse = rejected(simulate(-effect, seed_sd, discordant, seeds, questions, rng), 0.05, family)
    assert abs(stated - worse) <= 0.03, (stated, worse)
    # With no effect the test rejects at its level, not more.
    null = rejected(simulate(0.0, seed_sd, discordant, seeds, questions, rng), 0.05, family)
    assert null <= level(0.05, family) + 0.01


def test_the_simulated_test_is_the_studys_paired_t() -> None:
    diffs = simulate(0.02, 0.01, 0.15, 6, 200, np.random.default_rng(1))[:3]
    for row in diffs:
        study = paired_t(list(row), [0.0] * row.size)
        assert study.p == pytest.approx(stats.ttest_1samp(row, 0.0).pvalue)


def test_detectable_effect_is_the_effect_at_the_stated_power() -> None:
    spread = Spread(0.02, 0.35)
    for seeds, questions, family in [(2, 150, 1), (5, 150, 6), (10, 1000, 2), (40, 80, 1)]:
        mde = detectable_effect(spread, seeds, questions, family=family)
        assert power(mde, spread, seeds, questions, family=family) == pytest.approx(0.8, abs=1e-6)
        assert power(-mde, spread, seeds, questions, family=family) == pytest.approx(0.8, abs=1e-6)
    # More seeds, more questions and a smaller family each shrink it; a family of 3 at 0.05
    # is one test at 0.05/3.
    base = detectable_effect(spread, 5, 150, family=3)
    assert detectable_effect(spread, 6, 150, family=3) < base
    assert detectable_effect(spread, 5, 300, family=3) < base
    assert detectable_effect(spread, 5, 150, family=1) < base
    assert detectable_effect(spread, 5, 150, alpha=0.05 / 3) == pytest.approx(base)


def test_seeds_needed_is_the_smallest_count_that_reaches_the_power() -> None:
    spread = Spread(0.01, 0.36)
    n = seeds_needed(0.02, spread, 1000, family=2)
    assert n is not None and n > 2
    assert power(0.02, spread, n, 1000, family=2) >= 0.8
    assert power(0.02, spread, n - 1, 1000, family=2) < 0.8
    # The same at the detectable effect of n seeds: n is enough, n − 1 is not.
    mde = detectable_effect(spread, 12, 500)
    assert seeds_needed(mde * 1.0001, spread, 500) == 12
    # Out of reach within the cap: None, not a huge number.
    assert seeds_needed(0.0001, Spread(0.05, 0.3), 150, max_seeds=50) is None
    with pytest.raises(ValueError, match="0 cannot"):
        seeds_needed(0.0, spread, 100)


def test_questions_needed_is_the_smallest_count_and_none_when_seeds_dominate() -> None:
    spread = Spread(0.01, 0.36)
    q = questions_needed(0.02, spread, 10)
    assert q is not None
    assert power(0.02, spread, 10, q) >= 0.8 > power(0.02, spread, 10, q - 1)
    # With seed_sd above what n seeds allow, no number of questions is enough.
    assert questions_needed(0.02, Spread(0.05, 0.36), 10) is None
    assert questions_needed(0.02, Spread(0.0, 0.36), 2) is not None  # seed part 0: always
    assert questions_needed(0.5, Spread(0.01, 0.0), 10) == 1


def test_estimate_spread_recovers_the_two_parts() -> None:
    rng = np.random.default_rng(3)
    seeds, questions, seed_sd, r = 300, 400, 0.04, 0.3
    u = rng.normal(0, seed_sd, (seeds, 1))
    draw = rng.random((seeds, questions))
    # Per question: +1 with prob (r + u)/2, −1 with prob (r − u)/2, else 0 (E = u).
    diffs = np.where(draw < (r + u) / 2, 1.0, np.where(draw < r, -1.0, 0.0))
    found = estimate_spread(diffs)
    assert found.seed_sd == pytest.approx(seed_sd, rel=0.15)
    assert found.question_sd == pytest.approx(math.sqrt(r - seed_sd**2), rel=0.02)
    assert found.floor_sd == pytest.approx(found.question_sd / math.sqrt(questions))
    assert found.seeds == seeds and found.questions == questions
    # Seeds that vary less than question sampling alone: the seed part is 0, not negative.
    same = np.tile(diffs[:1], (5, 1))
    assert estimate_spread(same).seed_sd == 0.0
    # NaN (an unparsed answer for MAE) does not count.
    holes = diffs[:4].copy()
    holes[:, :10] = np.nan
    assert estimate_spread(holes).questions == questions - 10
    with pytest.raises(ValueError, match="at least 2 seeds"):
        estimate_spread(diffs[:1])


def test_the_seed_parts_upper_bound_covers_it_as_often_as_it_says() -> None:
    """Over simulated 5-seed studies with a known seed part, its 80 % upper bound lies at
    or above it in about 80 % of them (more where the question part's floor is cut off)."""
    rng = np.random.default_rng(11)
    seeds, questions, seed_sd, r = 5, 150, 0.03, 0.3
    covered = 0
    for _ in range(400):
        u = rng.normal(0, seed_sd, (seeds, 1))
        draw = rng.random((seeds, questions))
        diffs = np.where(draw < (r + u) / 2, 1.0, np.where(draw < r, -1.0, 0.0))
        covered += seed_sd_upper(estimate_spread(diffs)) >= seed_sd
    assert 0.75 <= covered / 400 <= 0.92
    # Seeds whose means vary less than question sampling alone: a point estimate of 0, but
    # a bound above it (5 seeds cannot rule out a seed part of a few points).
    for _ in range(20):  # no seed part at all: about half the draws estimate it as 0
        draw = rng.random((seeds, questions))
        low = estimate_spread(np.where(draw < r / 2, 1.0, np.where(draw < r, -1.0, 0.0)))
        if low.seed_sd == 0.0:
            break
    assert low.seed_sd == 0.0 and 0.0 < seed_sd_upper(low) < 0.1


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="both 0"):
        Spread(0.0, 0.0)
    with pytest.raises(ValueError, match="≥ 0"):
        Spread(-0.1, 0.3)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        power(0.1, Spread(0.0, 0.3), 1, 100)
    with pytest.raises(ValueError, match="alpha"):
        detectable_effect(Spread(0.0, 0.3), 5, 100, alpha=1.5)
    with pytest.raises(ValueError, match="family"):
        level(0.05, 0)


def test_rules_out_reads_in_the_metrics_better_direction() -> None:
    text = rules_out(-0.02, 0.03, higher_is_better=True)
    assert text == "rules out improvements larger than 0.03 and worsenings larger than 0.02"
    # MAE: a negative difference is an improvement.
    text = rules_out(-12.0, 5.0, higher_is_better=False)
    assert text == "rules out improvements larger than 12 and worsenings larger than 5"
    assert "any worsening" in rules_out(0.01, 0.05, higher_is_better=True)
    assert "any improvement" in rules_out(10.0, 86.0, higher_is_better=False)
