"""Numeric-query inference: predictions, seeded sampling, sampled statistics, numeric
decodings, completions, streaming and checkpoint loading (tiny random model, real tokenizer).

Some tests add a fixed bias to the model's output logits (a forward hook on lm_head) so a
random model writes digits, or a given token, deterministically: the model, tokenizer
and generation stay real; only what it prefers is steered.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bench import decoding as decoding_bench
from jobs.data import Example
from jobs.infer import InferenceRequestError, NumericPredictor
from jobs.infer.decoding import NumericDecodingProcessor, sample_summary
from jobs.infer.evaluate import generate_answers, parse_number
from jobs.losses.vocab import NumericVocab
from jobs.modeling.folders import UnsafeWeightsError
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import JobSpec, ModelSpec
from jobs.train.checkpoint import save_checkpoint

TINY = ModelSpec(source="random:tiny-digit")
PROMPTS = ["What is 1 + 1?", "Compute 317 - 24, please.", "7 + 8?"]


def predictor(bias_tokens: list[int] | None = None, **kwargs: Any) -> NumericPredictor:
    """The tiny model; with `bias_tokens`, those tokens get +30 on every logit row."""
    model, tok = load_model_and_tokenizer(TINY, seed=0)
    if bias_tokens is not None:
        bias = torch.zeros(len(tok))
        bias[bias_tokens] = 30.0

        def steer(module: Any, inputs: Any, output: torch.Tensor) -> torch.Tensor:
            return output + bias

        model.lm_head.register_forward_hook(steer)
    return NumericPredictor(model, tok, **{"use_chat_template": False, **kwargs})


@pytest.fixture(scope="module")
def digits() -> Iterator[NumericPredictor]:
    """A model that writes only digits (its own preference among them), never eos."""
    tok = load_model_and_tokenizer(TINY)[1]
    yield predictor(NumericVocab.from_tokenizer(tok).token_ids)


def test_predict_fields_and_greedy_text_matches_evaluation() -> None:
    plain = predictor()
    out = plain.predict(PROMPTS, max_new_tokens=6, samples=3, seed=0)
    assert len(out) == len(PROMPTS)
    for p in out:
        assert p.samples == 3 and 0 <= p.parsed_samples <= 3 and p.interval_mass == 0.9
        assert p.text == "".join(p.tokens).strip().split("\n", 1)[0]
    # The greedy text is exactly what evaluation scores for the same prompts.
    examples = [Example(q, "") for q in PROMPTS]
    assert [p.text for p in out] == generate_answers(
        plain.model, plain.tokenizer, examples, max_new_tokens=6, batch_size=3,
        use_chat_template=False,
    )  # fmt: skip


def test_predict_on_a_digit_writer(digits: NumericPredictor) -> None:
    out = digits.predict(PROMPTS, max_new_tokens=3, samples=8, seed=1)
    for p in out:
        assert len(p.tokens) == 3 and p.text.isdigit() and p.value == float(p.text)
        assert p.value_reason is None and p.parsed_samples == 8
        assert p.interval is not None and p.std is not None and p.expected_value is not None
        assert p.interval[0] <= p.expected_value <= p.interval[1]


def test_seeded_sampling_is_reproducible_and_leaves_the_callers_rng(
    digits: NumericPredictor,
) -> None:
    torch.manual_seed(5)
    after = torch.rand(2)
    torch.manual_seed(5)
    first = digits.predict(PROMPTS, max_new_tokens=3, samples=8, seed=7)
    assert torch.equal(torch.rand(2), after)
    again = digits.predict(PROMPTS, max_new_tokens=3, samples=8, seed=7)
    other = digits.predict(PROMPTS, max_new_tokens=3, samples=8, seed=8)
    assert first == again
    assert [p.expected_value for p in first] != [p.expected_value for p in other]


def test_statistics_are_those_of_the_samples(digits: NumericPredictor) -> None:
    k = 12
    out = digits.predict(PROMPTS, max_new_tokens=3, samples=k, interval_mass=0.8, seed=3)
    # The same sampling call, made by hand: each prompt repeated k times, same seed.
    repeated = [q for q in PROMPTS for _ in range(k)]
    drawn = digits.complete(repeated, max_new_tokens=3, temperature=1.0, seed=3, chat=True)
    for i, p in enumerate(out):
        values = np.array([parse_number(c.text) for c in drawn[i * k : (i + 1) * k]], dtype=float)
        assert len(set(values.tolist())) > 1  # a real spread, not a degenerate check
        assert p.expected_value == pytest.approx(values.mean())
        assert p.std == pytest.approx(values.std())
        assert p.interval == pytest.approx(tuple(np.quantile(values, [0.1, 0.9])))


def test_sample_summary_linear_and_on_the_clock() -> None:
    assert sample_summary([], 0.9) == (None, None, None)
    mean, std, interval = sample_summary([1.0, 2.0, 4.0, 9.0], 0.5)
    assert (mean, std) == pytest.approx((4.0, math.sqrt((9 + 4 + 0 + 25) / 4)))
    assert interval == pytest.approx((1.75, 5.25))  # numpy's linear quantiles 0.25, 0.75
    # 23:50 and 00:10 average to midnight, ten minutes either side, across midnight.
    mean, std, interval = sample_summary([1430.0, 10.0], 0.9, period=1440.0)
    assert mean is not None and min(mean, 1440 - mean) == pytest.approx(0.0, abs=1e-6)
    assert std == pytest.approx(10.0)
    assert interval == pytest.approx((1431.0, 9.0))  # lo > hi: spans midnight


def digit_scores(tok: Any, probs: list[dict[int, float]], winner: int | None = None) -> Any:
    """[B, V] logits: log p over the digits of each row, others far below (or `winner` on top)."""
    vocab = NumericVocab.from_tokenizer(tok)
    id_of = {int(v): i for i, v in zip(vocab.token_ids, vocab.values, strict=True)}
    scores = torch.full((len(probs), len(tok)), -50.0)
    for row, p in enumerate(probs):
        for digit, mass in p.items():
            scores[row, id_of[digit]] = math.log(mass)
    if winner is not None:
        scores[-1, winner] = 5.0
    return scores, id_of, vocab


def test_numeric_processor_picks_nearest_mean_and_weighted_median() -> None:
    tok = load_model_and_tokenizer(TINY)[1]
    rows = [{1: 0.35, 2: 0.05, 9: 0.6}, {0: 0.3, 1: 0.25, 8: 0.45}, {4: 1.0}]
    scores, id_of, vocab = digit_scores(tok, rows, winner=tok.get_vocab()["a"])
    # By hand: row 0 mean 0.35 + 0.1 + 5.4 = 5.85 → 6; cumulative 0.35, 0.40, 1.0 → median 9.
    #          row 1 mean 0.25 + 3.6 = 3.85 → 4;       cumulative 0.30, 0.55 → median 1.
    # Row 2's greedy token is the letter "a": left exactly as it was.
    for mode, want in (("expected", [6, 4]), ("median", [9, 1])):
        proc = NumericDecodingProcessor(vocab, len(tok), mode)  # type: ignore[arg-type]
        out = proc(torch.zeros(3, 1, dtype=torch.long), scores.clone())
        assert out[:2].argmax(dim=-1).tolist() == [id_of[d] for d in want]
        assert torch.isinf(out[:2]).sum() == 2 * (len(tok) - 1)  # only the choice survives
        assert torch.equal(out[2], scores[2])


def test_numeric_processor_keeps_digit_length_and_prefers_the_likelier_twin() -> None:
    # Tokens 0..6: "0" "5" "9" "000" "500" "900" "Ġ5" (value 5 again, like GPT-2's).
    vocab = NumericVocab([0, 1, 2, 3, 4, 5, 6], [0, 5, 9, 0, 500, 900, 5], [1, 1, 1, 3, 3, 3, 1])
    process = NumericDecodingProcessor(vocab, 8, "expected")
    logits = torch.full((2, 8), -30.0)
    # Row 0, greedy "900": the 3-digit mean 0·.35 + 500·.1 + 900·.55 = 545 → "500". Had the
    # 1-digit tokens counted, the mean would be (545 + 2.7 + 2.7 + 4.86) / 2.62 ≈ 212 → "9".
    logits[0, [3, 4, 5, 1, 6, 2]] = torch.tensor([0.35, 0.1, 0.55, 0.54, 0.54, 0.54]).log()
    # Row 1, greedy "9": mean .25·5 + .3·5 + .45·9 = 6.8 → value 5, held by "5" (.25) and
    # "Ġ5" (.3): the likelier "Ġ5".
    logits[1, [1, 6, 2]] = torch.tensor([0.25, 0.3, 0.45]).log()
    out = process(torch.zeros(2, 1, dtype=torch.long), logits.clone())
    assert out.argmax(dim=-1).tolist() == [4, 6]


def test_numeric_decoding_first_token_against_the_models_own_logits(
    digits: NumericPredictor,
) -> None:
    out = digits.predict(PROMPTS, max_new_tokens=1, decoding="expected", samples=0)
    vocab = digits.vocab
    for prompt, p in zip(PROMPTS, out, strict=True):
        batch = digits._batch([prompt], chat=True)
        with torch.no_grad():
            last = digits.model(**batch).logits[0, -1]
        probs = torch.softmax(last[vocab.token_ids].double(), dim=0).tolist()
        mean = sum(q * v for q, v in zip(probs, vocab.values, strict=True))
        assert p.value == min(vocab.values, key=lambda v: abs(v - mean))
        assert p.samples == 0 and p.expected_value is None and p.interval is None


def test_no_number_gives_none_with_a_reason() -> None:
    vocab = load_model_and_tokenizer(TINY)[1].get_vocab()
    a = vocab["a"]
    [p] = predictor([a]).predict(["What is 2 + 2?"], max_new_tokens=4, samples=2, seed=0)
    assert p.text == "aaaa" and p.value is None
    assert p.value_reason == "no number in the generated text"
    assert p.parsed_samples == 0 and p.expected_value is None and p.std is None
    [c] = predictor([a], task="clock").predict(["When?"], samples=0)
    assert c.value_reason == "no hh:mm time in the generated text"
    # 320 nines overflow a float (max ~1.8e308): no inf passes as a value.
    [h] = predictor([vocab["9"]]).predict(["1 + 1"], max_new_tokens=320, samples=0)
    assert h.value is None and h.value_reason is not None and "too large" in h.value_reason


def test_complete_and_stream(digits: NumericPredictor) -> None:
    [c] = digits.complete(["1 2 3"], max_new_tokens=4)
    assert c.finish_reason == "length" and c.completion_tokens == 4 and len(c.text) == 4
    assert c.prompt_tokens == len(digits.tokenizer("1 2 3")["input_ids"])
    assert "".join(digits.stream("1 2 3", max_new_tokens=4)) == c.text
    stops = predictor([load_model_and_tokenizer(TINY)[1].eos_token_id])
    [s] = stops.complete(["1 2 3"], max_new_tokens=4)
    assert (s.text, s.finish_reason, s.completion_tokens) == ("", "stop", 1)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"decoding": "mean"}, "decoding"),
        ({"samples": -1}, "samples"),
        ({"interval_mass": 1.5}, "interval_mass"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"temperature": 0.0}, "temperature"),
    ],
)
def test_bad_arguments_name_the_field(
    digits: NumericPredictor, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InferenceRequestError, match=f"^{field}:"):
        digits.predict(["1 + 1"], **kwargs)
    with pytest.raises(InferenceRequestError, match=r"^prompts"):
        digits.predict([])


def test_checkpoint_round_trip_and_pickles_refused(tmp_path: Path) -> None:
    model, tok = load_model_and_tokenizer(TINY, seed=0)
    spec = JobSpec.model_validate(
        {"name": "t", "model": {"source": "random:tiny-digit", "use_chat_template": False},
         "data": {"task": "clock"}}
    )  # fmt: skip
    ckpt = tmp_path / "checkpoint"
    save_checkpoint(ckpt, model=model, tokenizer=tok, spec=spec, metrics={"step": 1})
    loaded = NumericPredictor.from_checkpoint(ckpt)
    assert loaded.task == "clock" and loaded.use_chat_template is False
    fresh = NumericPredictor(model, tok, task="clock", use_chat_template=False)
    kwargs: dict[str, Any] = {"max_new_tokens": 5, "samples": 2, "seed": 0}
    assert loaded.predict(PROMPTS, **kwargs) == fresh.predict(PROMPTS, **kwargs)

    pickled = tmp_path / "pickled"
    model.config.save_pretrained(pickled)
    tok.save_pretrained(pickled)
    torch.save(model.state_dict(), pickled / "pytorch_model.bin")
    with pytest.raises(UnsafeWeightsError, match="never loads pickled weights"):
        NumericPredictor.from_checkpoint(pickled)


def test_decoding_bench_runs_at_a_tiny_size() -> None:
    assert decoding_bench.make_spec(steps=5, batch=4, threads=1).train.steps == 5
    examples = [Example("1 + 1", "2"), Example("What is 3 - 5?", "-2")]
    rows = decoding_bench.evaluate(predictor(), examples, samples=2, batch=2)
    assert rows["questions"] == 2 and set(rows["greedy"]["vs_greedy"].values()) <= {0, 2}
    assert rows["sampled_mean"]["samples"] == 2 and len(rows["examples"]) == 2
