"""Numbers parsed from generated text, the scores, and batched greedy generation."""

from __future__ import annotations

import math

import pytest

from jobs.data import Example
from jobs.infer.evaluate import (
    digit_accuracy,
    generate_answers,
    parse_number,
    parse_time,
    question_records,
    score,
    score_records,
)
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import ModelSpec


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42.0),
        ("-7", -7.0),
        ("-0.5", -0.5),
        ("3.25 apples", 3.25),
        ("1,234", 1234.0),
        ("The answer is 42.", 42.0),
        ("3/4", 0.75),
        ("-1/9", -1 / 9),
        ("x = -12 and then 5", -12.0),
        ("  0007", 7.0),
        ("1e5", 1.0),  # no exponent notation: the first number is 1
        ("-.5", -0.5),
        ("14017502.56", 14017502.56),
        ("", None),
        ("abc", None),
        ("-", None),
        ("1/0", None),
        ("1.1/5", 0.22),  # a decimal numerator (a sampled answer crashed serving with it)
        ("0.5/0", None),
    ],
)
def test_parse_number(text: str, value: float | None) -> None:
    parsed = parse_number(text)
    assert parsed == (None if value is None else pytest.approx(value))


@pytest.mark.parametrize(
    ("text", "minutes"),
    [("13:15", 795), ("It is 09:05 now", 545), ("0:00", 0), ("25:00", None), ("noon", None)],
)
def test_parse_time(text: str, minutes: int | None) -> None:
    assert parse_time(text) == minutes


def test_each_answer_judged_as_the_scores_count_it() -> None:
    preds = ["12", "7.5", "abc", "-3", "yes", "no"]
    targets = ["12", "8", "5", "3", "yes", "yes"]
    prompts = [f"q{i}" for i in range(6)]
    records = question_records(preds, targets, "arithmetic", prompts)
    assert [r.prompt for r in records] == prompts
    assert [r.correct for r in records] == [True, False, False, False, True, False]
    assert [r.value for r in records] == [12.0, 7.5, None, -3.0, None, None]
    assert [r.target_value for r in records] == [12.0, 8.0, 5.0, 3.0, None, None]
    assert [r.abs_error for r in records] == [0.0, 0.5, None, 6.0, None, None]
    # Text answers: 1 when exact, as every share counts them; unparsed numbers: 0.
    assert [r.digit_accuracy for r in records] == pytest.approx([1, 0, 0, 0, 1, 0])
    out = score_records(records)
    assert out == score(preds, targets, "arithmetic")
    assert out["exact_match"] == pytest.approx(2 / 6)
    assert out["parse_failure_rate"] == pytest.approx(1 / 6)  # text answers never fail to parse
    assert out["mae"] == pytest.approx((0 + 0.5 + 6) / 3)
    # Clock tasks: minutes off on the 24-hour circle.
    (late,) = question_records(["23:50"], ["00:10"], "clock")
    assert (late.value, late.target_value, late.abs_error) == (1430, 10, 20)


def test_scores_on_hand_made_lists() -> None:
    preds = ["12", "7.5", "abc", "-3", "1/2"]
    targets = ["12", "8", "5", "3", "0.5"]
    out = score(preds, targets, "arithmetic")
    assert out["exact_match"] == pytest.approx(2 / 5)
    assert out["parse_failure_rate"] == pytest.approx(1 / 5)
    assert out["mae"] == pytest.approx((0 + 0.5 + 6 + 0) / 4)
    # relative errors 0, 0.5/8, 6/3, 0 → median of four = (0 + 0.0625) / 2
    assert out["median_rel_error"] == pytest.approx(0.03125)


def test_tolerance_and_digit_accuracy_by_hand() -> None:
    preds = ["1000", "1040", "842", "abc", "-5"]
    targets = ["1005", "1000", "841", "7", "5"]
    out = score(preds, targets, "add")
    # |err|/|t|: 0.5 % (within 1 %), 4 % (within 5 % only), 0.12 % (within 1 %), unparsed, 200 %.
    assert out["within_1pct"] == pytest.approx(2 / 5)
    assert out["within_5pct"] == pytest.approx(3 / 5)
    # Places right: 1000/1005 → 3 of 4; 1040/1000 → 3 of 4; 842/841 → 2 of 3; unparsed 0;
    # -5 vs 5 has the wrong sign → 0.
    assert out["digit_accuracy"] == pytest.approx((0.75 + 0.75 + 2 / 3) / 5)


def test_digit_places_align_at_the_point_and_clocks_are_hhmm() -> None:
    assert digit_accuracy(12.5, 2.25, clock=False) == pytest.approx(1 / 4)  # "125 " vs " 225"
    assert digit_accuracy(99.0, 100.0, clock=False) == pytest.approx(0.0)
    assert digit_accuracy(13 * 60 + 15, 3 * 60 + 15, clock=True) == pytest.approx(3 / 4)


def test_clock_scores_are_minutes_off() -> None:
    out = score(["23:50", "10:00", "?"], ["00:10", "10:00", "01:00"], "clock")
    assert out["mae"] == pytest.approx(10.0)
    assert out["exact_match"] == pytest.approx(1 / 3)
    assert out["parse_failure_rate"] == pytest.approx(1 / 3)


def test_nothing_parses_gives_nan_not_zero() -> None:
    out = score(["x", "y"], ["1", "2"], "arithmetic")
    assert math.isnan(out["mae"]) and out["parse_failure_rate"] == 1.0


def test_batched_greedy_generation_matches_one_by_one() -> None:
    model, tok = load_model_and_tokenizer(ModelSpec(source="random:tiny-qwen"), seed=0)
    model.eval()
    examples = [Example("What is 1 + 1?", "2"), Example("Compute 317 * 24 please.", "7608")]
    batched = generate_answers(
        model, tok, examples, max_new_tokens=6, batch_size=2, use_chat_template=False
    )
    single = [
        generate_answers(model, tok, [ex], max_new_tokens=6, batch_size=1, use_chat_template=False)[
            0
        ]
        for ex in examples
    ]
    assert batched == single
    assert len(batched) == 2 and all("\n" not in text for text in batched)
