"""jobs.stats.paired: the paired t-test, TOST, Holm and BH against hand-worked values and
against scipy's distributions used directly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sp

from jobs.stats import benjamini_hochberg, holm, paired_t, tost
from jobs.stats.paired import fmt, tally


def df2_two_sided(t: float) -> float:
    # Student t with 2 degrees of freedom has the closed form P(|T| ≥ t) = 1 − t/√(t² + 2).
    return 1 - t / math.sqrt(t * t + 2)


def test_paired_t_by_hand() -> None:
    # Differences 1, 2, 3: mean 2, sd 1, se 1/√3, t = 2√3, df 2.
    out = paired_t([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    t = 2 * math.sqrt(3)
    assert (out.n, out.mean_diff, out.reason) == (3, 2.0, None)
    assert out.t == pytest.approx(t)
    assert out.p == pytest.approx(df2_two_sided(t))
    assert out.d_z == pytest.approx(2.0)
    # t(0.975, df 2) = 4.303 from printed tables.
    half = 4.303 / math.sqrt(3)
    assert out.ci == pytest.approx((2 - half, 2 + half), abs=1e-3)


@pytest.mark.parametrize(
    ("df", "critical"),
    # Two-sided 5 % critical values from printed t tables.
    [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (9, 2.262)],
)
def test_interval_uses_the_printed_t_quantile(df: int, critical: float) -> None:
    diffs = np.array([float(i * i % 7) for i in range(df + 1)])
    out = paired_t(list(diffs), [0.0] * (df + 1))
    assert out.ci is not None and out.mean_diff is not None
    se = diffs.std(ddof=1) / math.sqrt(df + 1)
    assert (out.ci[1] - out.mean_diff) / se == pytest.approx(critical, abs=1e-3)


def test_paired_t_against_scipy_distribution() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.normal(0.5, 0.1, 6), rng.normal(0.45, 0.1, 6)
    d = a - b
    se = d.std(ddof=1) / math.sqrt(6)
    t = d.mean() / se
    out = paired_t(list(a), list(b), alpha=0.1)
    assert out.t == pytest.approx(t, rel=1e-12)
    assert out.p == pytest.approx(2 * sp.t.sf(abs(t), 5), rel=1e-10)
    half = sp.t.ppf(0.95, 5) * se
    assert out.ci == pytest.approx((d.mean() - half, d.mean() + half), rel=1e-10)


def test_no_test_without_variance_or_pairs() -> None:
    same = paired_t([0.5, 0.6, 0.7], [0.5, 0.6, 0.7])
    assert (same.p, same.ci, same.mean_diff) == (None, None, 0.0)
    assert "zero variance" in (same.reason or "")
    # 0.3 − 0.1 and 0.5 − 0.3 differ in the last bits only: still the same difference.
    noisy = paired_t([0.3, 0.5, 0.7], [0.1, 0.3, 0.5])
    assert noisy.p is None and noisy.mean_diff == pytest.approx(0.2)
    one = paired_t([0.4], [0.2])
    assert one.p is None and one.mean_diff == pytest.approx(0.2)
    assert "at least 2" in (one.reason or "")
    assert paired_t([], []).mean_diff is None
    with pytest.raises(ValueError, match="shape"):
        paired_t([1.0, 2.0], [1.0])


def test_tost_by_hand() -> None:
    # Differences 0, +0.01, −0.01: mean 0, se 0.01/√3. One-sided p at df 2 is half the
    # two-sided closed form.
    a, b = [0.50, 0.61, 0.39], [0.50, 0.60, 0.40]
    se = 0.01 / math.sqrt(3)
    for margin in (0.02, 0.01):
        t = margin / se
        assert tost(a, b, margin) == pytest.approx(df2_two_sided(t) / 2, rel=1e-6)
    assert tost(a, b, 0.02) < 0.05 < tost(a, b, 0.01)  # type: ignore[operator]
    # Shifted by +0.015: the upper test (mean < margin) is the weaker one.
    shifted = [x + 0.015 for x in a]
    t_upper = (0.02 - 0.015) / se
    assert tost(shifted, b, 0.02) == pytest.approx(df2_two_sided(t_upper) / 2, rel=1e-6)
    assert tost([0.5, 0.5], [0.5, 0.5], 0.02) is None
    with pytest.raises(ValueError, match="margin"):
        tost(a, b, 0.0)


def test_holm_by_hand() -> None:
    # m = 3 defined: sorted 0.01·3 = 0.03, 0.03·2 = 0.06, max(0.06, 0.04·1) = 0.06.
    assert holm([0.01, 0.04, 0.03, None, math.nan]) == pytest.approx([0.03, 0.06, 0.06, None, None])
    assert holm([0.6, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []


def test_benjamini_hochberg_by_hand() -> None:
    # m = 4, sorted 0.01, 0.03, 0.04, 0.2 → p·m/rank 0.04, 0.06, 0.0533, 0.2; step-up
    # minimum from the top: 0.2, 0.0533, 0.0533, 0.04.
    out = benjamini_hochberg([0.01, 0.04, 0.03, None, 0.2])
    assert out == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, None, 0.2])
    assert benjamini_hochberg([None]) == [None]


def test_tally_follows_the_metric_direction() -> None:
    diffs = [0.1, -0.2, 0.0, 0.3]
    assert tally(diffs, higher_is_better=True) == (2, 1, 1)
    assert tally(diffs, higher_is_better=False) == (1, 2, 1)


def test_fmt() -> None:
    assert fmt(0.128) == "+0.13"
    assert fmt(-0.02) == "−0.02"
    assert fmt(0.004) == "+0.004"
    assert fmt(-1234.5) == "−1,234"
    assert fmt(0.02, signed=False) == "0.02"
