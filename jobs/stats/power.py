"""Power of a study's primary test: the smallest effect it detects, the seeds and questions
an effect needs, and the spread of paired differences these rest on (scipy, numpy).

The test is the one `compare` runs (jobs/stats/paired.py): a two-sided paired t-test over
seeds of the per-seed difference d_s = metric(arm, s) − metric(ce, s), df = n − 1, with
Holm over the family of primary tests. One seed's difference is modelled as

    d_s = δ + u_s + e_s,   u_s ~ N(0, seed_sd²),   e_s ~ N(0, question_sd² / Q)

u_s is what a training seed does beyond question sampling; e_s is the mean over the Q
held-out questions of the per-question paired difference's deviation (question_sd is the SD
of arm − ce on one question, e.g. in {−1, 0, 1} for exact match). So SD(d) =
√(seed_sd² + question_sd²/Q), and the t statistic over n seeds follows a noncentral t with
df n − 1 and noncentrality δ√n / SD(d).

Alpha: two-sided, at `alpha / family` — the level Holm's first (most conservative) step
asks of the smallest p in a family of `family` primary tests; family = 1 is plain alpha.
Every figure here is at that level, so it is what one arm needs when every arm of the
family is tested, not the average case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, stats

POWER = 0.8
ALPHA = 0.05
MAX_SEEDS = 1000  # beyond this a plan reports "not reachable" rather than a number


@dataclass(frozen=True)
class Spread:
    """The two parts of the per-seed paired difference's spread (metric units)."""

    seed_sd: float
    question_sd: float

    def __post_init__(self) -> None:
        if not (self.seed_sd >= 0 and self.question_sd >= 0):
            raise ValueError(f"spreads must be ≥ 0, got {self.seed_sd}, {self.question_sd}")
        if self.seed_sd == 0 and self.question_sd == 0:
            raise ValueError("seed_sd and question_sd are both 0: no spread to plan with")

    def sd(self, questions: float) -> float:
        """SD of one seed's paired difference with `questions` held-out questions."""
        return math.sqrt(self.seed_sd**2 + self.question_sd**2 / questions)


@dataclass(frozen=True)
class SpreadEstimate(Spread):
    """A spread measured from per-seed, per-question paired differences."""

    observed_sd: float  # SD over seeds of the per-seed mean difference (ddof 1)
    floor_sd: float  # question_sd / √questions: what question sampling alone gives
    seeds: int
    questions: float  # mean count of questions that counted per seed


def level(alpha: float = ALPHA, family: int = 1) -> float:
    """The two-sided level one test is held to: Holm's first step, alpha / family."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if family < 1:
        raise ValueError(f"the family has at least one test, got {family}")
    return alpha / family


def _power_at_ncp(ncp: np.ndarray | float, seeds: np.ndarray | int, at: float) -> np.ndarray:
    """P(|T| > t_crit) for T ~ noncentral t(df = seeds − 1, ncp), two-sided level `at`."""
    df = np.asarray(seeds, dtype=float) - 1
    crit = stats.t.ppf(1 - at / 2, df)
    ncp = np.asarray(ncp, dtype=float)
    # The far tail as the upper tail of −ncp: scipy's nct.cdf(−crit) turns NaN at large ncp
    # where that tail is far below any power that matters.
    far = np.nan_to_num(stats.nct.sf(crit, df, -ncp), nan=0.0)
    return np.asarray(stats.nct.sf(crit, df, ncp) + far)


def _check(seeds: int, questions: float) -> None:
    if seeds < 2:
        raise ValueError(f"a paired t-test needs at least 2 seeds, got {seeds}")
    if questions < 1:
        raise ValueError(f"at least one question, got {questions}")


def power(
    effect: float,
    spread: Spread,
    seeds: int,
    questions: float,
    alpha: float = ALPHA,
    family: int = 1,
) -> float:
    """Probability that the study's paired t over `seeds` rejects at alpha/family when the
    true mean difference is `effect` (either sign)."""
    _check(seeds, questions)
    ncp = abs(effect) * math.sqrt(seeds) / spread.sd(questions)
    return float(_power_at_ncp(ncp, seeds, level(alpha, family)))


def _ncp_for(seeds: int, at: float, target: float) -> float:
    """The noncentrality at which a test over `seeds` reaches power `target`."""
    if not 0 < target < 1:
        raise ValueError(f"power must be in (0, 1), got {target}")
    high = 1.0
    while float(_power_at_ncp(high, seeds, at)) < target:
        high *= 2  # n = 2 at a small level needs an ncp in the hundreds
    return float(optimize.brentq(lambda x: float(_power_at_ncp(x, seeds, at)) - target, 0, high))


def detectable_effect(
    spread: Spread,
    seeds: int,
    questions: float,
    alpha: float = ALPHA,
    family: int = 1,
    target: float = POWER,
) -> float:
    """The smallest |mean difference| detected with probability `target` (metric units)."""
    _check(seeds, questions)
    ncp = _ncp_for(seeds, level(alpha, family), target)
    return ncp * spread.sd(questions) / math.sqrt(seeds)


def seeds_needed(
    effect: float,
    spread: Spread,
    questions: float,
    alpha: float = ALPHA,
    family: int = 1,
    target: float = POWER,
    max_seeds: int = MAX_SEEDS,
) -> int | None:
    """The fewest seeds (≥ 2) that detect `effect` with probability `target` at `questions`
    questions per run; None when even `max_seeds` do not."""
    _check(2, questions)
    if effect == 0:
        raise ValueError("a target effect of 0 cannot be detected")
    n = np.arange(2, max_seeds + 1)  # [N] candidate seed counts, power rises with n
    ncp = abs(effect) * np.sqrt(n) / spread.sd(questions)
    reached = np.flatnonzero(_power_at_ncp(ncp, n, level(alpha, family)) >= target)
    return int(n[reached[0]]) if reached.size else None


def questions_needed(
    effect: float,
    spread: Spread,
    seeds: int,
    alpha: float = ALPHA,
    family: int = 1,
    target: float = POWER,
) -> int | None:
    """The fewest questions per run that detect `effect` with probability `target` over
    `seeds` seeds; None when the seed part alone is too large (no number of questions does).

    The test over n seeds reaches `target` at one noncentrality ncp*, so SD(d) may be at
    most |effect|·√n / ncp*: solve seed_sd² + question_sd²/Q ≤ that² for Q."""
    _check(seeds, 1)
    if effect == 0:
        raise ValueError("a target effect of 0 cannot be detected")
    allowed = abs(effect) * math.sqrt(seeds) / _ncp_for(seeds, level(alpha, family), target)
    room = allowed**2 - spread.seed_sd**2
    if room <= 0:
        return None
    if spread.question_sd == 0:
        return 1
    return max(1, math.ceil(spread.question_sd**2 / room * (1 - 1e-12)))


def estimate_spread(diffs: ArrayLike) -> SpreadEstimate:
    """(seed SD, question SD) from per-question paired outcomes of an earlier study.

    diffs [S, Q]: row s is seed s, column q question q, the value arm − ce on that question
    (NaN: the question does not count for this metric, e.g. an unparsed answer for MAE).
    question_sd² is the within-seed variance over questions, pooled over seeds; the seed
    part is what the per-seed means vary beyond that: seed_sd² = max(0, var_s(mean_s) −
    question_sd²/Q) (method of moments). Every seed answers the same questions, so part of
    question_sd may be a question's own lasting effect, which repeats across seeds and the
    t-test does not see: treating it as fresh per seed errs towards more seeds, not fewer."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 2 or d.shape[0] < 2:
        raise ValueError(f"need per-question differences of at least 2 seeds [S, Q], got {d.shape}")
    counted = np.count_nonzero(~np.isnan(d), axis=1)  # [S]
    if np.any(counted < 2):
        raise ValueError("every seed needs at least 2 questions that count")
    means = np.nanmean(d, axis=1)  # [S]
    within = float(np.mean(np.nanvar(d, axis=1, ddof=1)))
    questions = float(np.mean(counted))
    observed = float(np.var(means, ddof=1))
    floor = within / questions
    return SpreadEstimate(
        seed_sd=math.sqrt(max(0.0, observed - floor)),
        question_sd=math.sqrt(within),
        observed_sd=math.sqrt(observed),
        floor_sd=math.sqrt(floor),
        seeds=int(d.shape[0]),
        questions=questions,
    )


def seed_sd_upper(found: SpreadEstimate, confidence: float = POWER) -> float:
    """An upper confidence bound of the seed part: few seeds pin it down poorly (5 seeds
    whose means vary less than question sampling alone give 0, and are also consistent with
    a seed SD of several points).

    The per-seed means' variance v over S seeds has (S − 1) v / σ² ~ χ²(S − 1) under the
    model, so σ² ≤ (S − 1) v / χ²_{1−confidence}(S − 1) with that confidence; the question
    part's share is taken off as in estimate_spread."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    df = found.seeds - 1
    upper = df * found.observed_sd**2 / float(stats.chi2.ppf(1 - confidence, df))
    return math.sqrt(max(0.0, upper - found.floor_sd**2))


def rules_out(low: float, high: float, higher_is_better: bool, digits: int = 2) -> str:
    """What a CI [low, high] of arm − ce rules out, in the metric's better direction:
    sizes of improvement and of worsening (metric units, unsigned)."""

    def num(x: float) -> str:
        return f"{abs(x):.{digits}g}"

    # The interval of the improvement: the difference itself, or its negative for a metric
    # where lower is better (MAE).
    a, b = (low, high) if higher_is_better else (-high, -low)
    if a < 0 < b:
        return f"rules out improvements larger than {num(b)} and worsenings larger than {num(a)}"
    if a >= 0:
        return (
            f"rules out no effect and any worsening; the improvement lies in "
            f"[{num(a)}, {num(b)}], larger ones ruled out"
        )
    return (
        f"rules out no effect and any improvement; the worsening lies in "
        f"[{num(b)}, {num(a)}], larger ones ruled out"
    )
