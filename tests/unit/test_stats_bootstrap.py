"""jobs.stats.bootstrap: per-question values, the paired bootstrap over questions × seeds,
against hand-worked limits and scipy.stats.bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sp

from jobs.stats import QuestionRecord, RunOutcome, compare
from jobs.stats.bootstrap import paired_bootstrap, question_values


def record(target: float | str, value: float | None) -> QuestionRecord:
    if isinstance(target, str):  # a text answer
        return QuestionRecord(
            target=target, prediction=str(value), value=None, target_value=None,
            correct=str(value) == target, abs_error=None,
        )  # fmt: skip
    error = None if value is None else abs(value - target)
    return QuestionRecord(
        target=f"{target:g}", prediction="?" if value is None else f"{value:g}", value=value,
        target_value=target, correct=error is not None and error == 0, abs_error=error,
    )  # fmt: skip


def test_question_values_follow_the_evaluation_rules() -> None:
    records = [record(100, 100), record(100, 104), record(100, 110), record(0.5, None),
               record("yes", "yes")]  # fmt: skip
    nan = float("nan")
    got = {m: question_values(records, m) for m in
           ("exact_match", "within_5pct", "within_1pct", "mae", "median_rel_error",
            "parse_failure_rate")}  # fmt: skip
    assert got["exact_match"] == pytest.approx([1, 0, 0, 0, 1])
    assert got["within_5pct"] == pytest.approx([1, 1, 0, 0, 1])
    assert got["within_1pct"] == pytest.approx([1, 0, 0, 0, 1])
    # MAE counts parsed numeric answers only; relative error divides by max(|target|, 1).
    assert got["mae"] == pytest.approx([0, 4, 10, nan, nan], nan_ok=True)
    assert got["median_rel_error"] == pytest.approx([0, 0.04, 0.1, nan, nan], nan_ok=True)
    assert got["parse_failure_rate"] == pytest.approx([0, 0, 0, 1, 0])
    assert question_values(records, "digit_accuracy") is None  # records without the field
    shares = [1, 0.5, 0, 0, 1]
    scored = [
        r.model_copy(update={"digit_accuracy": d}) for r, d in zip(records, shares, strict=True)
    ]
    assert question_values(scored, "digit_accuracy") == pytest.approx([1, 0.5, 0, 0, 1])


def test_identical_and_opposite_runs() -> None:
    same = np.array([[1.0, 0.0, 1.0, 0.0]] * 3)
    out = paired_bootstrap(same, same, "exact_match", n_boot=500, alpha=0.05, seed=0)
    assert out is not None and out.ci == (0.0, 0.0) and out.p == 1.0
    # The arm right everywhere, the baseline nowhere: every replicate is +1.
    out = paired_bootstrap(np.ones((3, 4)), np.zeros((3, 4)), "exact_match", n_boot=500,
                           alpha=0.05, seed=0)  # fmt: skip
    assert out is not None and out.ci == (1.0, 1.0)
    assert out.p == pytest.approx(2 / 501)


def test_one_seed_matches_scipy_bootstrap() -> None:
    # With one seed only the questions are resampled: scipy's paired percentile bootstrap of
    # the mean difference is the same estimator (other random draws: agree to Monte Carlo
    # error).
    rng = np.random.default_rng(3)
    arm = (rng.random(400) < 0.55).astype(float)
    base = (rng.random(400) < 0.45).astype(float)
    ours = paired_bootstrap(arm[None], base[None], "exact_match", n_boot=20000, alpha=0.05,
                            seed=1)  # fmt: skip
    theirs = sp.bootstrap(
        (arm, base), lambda a, b, axis: a.mean(axis) - b.mean(axis), paired=True,
        vectorized=True, n_resamples=20000, method="percentile", rng=np.random.default_rng(2),
    )  # fmt: skip
    assert ours is not None
    ci = theirs.confidence_interval
    assert ours.ci == pytest.approx((ci.low, ci.high), abs=0.006)


def test_seeds_are_resampled_too() -> None:
    # Question-level noise is nil (every question alike within a run), seed-level spread is
    # large: the interval must come from resampling the seeds.
    arm = np.array([[0.0] * 50, [1.0] * 50, [0.0] * 50, [1.0] * 50])
    base = np.zeros((4, 50))
    out = paired_bootstrap(arm, base, "exact_match", n_boot=2000, alpha=0.05, seed=0)
    assert out is not None
    assert out.ci[0] < 0.3 and out.ci[1] > 0.7


def test_median_rel_error_uses_the_median() -> None:
    arm = np.array([[0.0, 0.0, 10.0]])
    base = np.array([[1.0, 1.0, 1.0]])
    out = paired_bootstrap(arm, base, "median_rel_error", n_boot=2000, alpha=0.05, seed=0)
    # A median of three draws from {0, 0, 10} is 10 only if two or more draws are 10
    # (probability 7/27): the 2.5 % and 97.5 % quantiles of median − 1 are −1 and 9.
    assert out is not None and out.ci == (-1.0, 9.0)


def test_compare_carries_the_bootstrap_and_says_when_absent() -> None:
    def run(seed: int, values: list[float | None]) -> RunOutcome:
        records = [record(10, v) for v in values]
        em = sum(r.correct for r in records) / len(records)
        metrics = {"exact_match": em, "digit_accuracy": em + seed / 10}
        return RunOutcome(seed=seed, metrics=metrics, questions=records)

    base = [run(s, [10, 11, 12, None, 10][s:] + [9] * s) for s in range(3)]
    arm = [run(s, [10, 10, 10, 11, 10][s:] + [10] * s) for s in range(3)]
    out = compare({"ce": base, "x": arm}, secondary=("mae", "digit_accuracy"), n_boot=400)
    test = out.arms[1].vs_ce
    assert test is not None and test.boot_seeds == 3
    assert test.ci_boot is not None and test.p_boot is not None
    assert test.ci_boot.low <= test.diff <= test.ci_boot.high  # type: ignore[operator]
    digit = out.arms[1].secondary[1]
    assert digit.ci_boot is None and "not in the per-question records" in digit.notes[-1]
    partial = compare({"ce": base, "x": [arm[0].model_copy(update={"questions": []}), *arm[1:]]})
    assert partial.arms[1].vs_ce is not None and partial.arms[1].vs_ce.boot_seeds == 2
    assert "bootstrap over 2 of 3 pairs (seeds [1, 2])" in partial.arms[1].vs_ce.notes
    bare = compare({"ce": [r.model_copy(update={"questions": []}) for r in base], "x": arm})
    assert bare.arms[1].vs_ce is not None and bare.arms[1].vs_ce.ci_boot is None
    assert "no per-question predictions: no bootstrap" in bare.arms[1].vs_ce.notes


def test_shape_mismatch_is_refused() -> None:
    with pytest.raises(ValueError, match="shape"):
        paired_bootstrap(np.zeros((2, 3)), np.zeros((2, 4)), "mae", n_boot=100, alpha=0.05,
                         seed=0)  # fmt: skip
