"""Number-first greedy: number tokens compete as one choice against each other token."""

from __future__ import annotations

import math
from typing import Any

import torch

from jobs.data import Example
from jobs.infer import NumericPredictor
from jobs.infer.evaluate import generate_answers, parse_number
from jobs.infer.number_first import NumberFirstProcessor
from jobs.losses.vocab import NumericVocab
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import ModelSpec

# A 1,000-token "0".."999" number vocabulary at ids 10..1009, other tokens at 0..9.
VOCAB = NumericVocab(list(range(10, 1010)), [float(v) for v in range(1000)],
                     [len(str(v)) for v in range(1000)])  # fmt: skip
SPACE = 3


def logits_from(probs: torch.Tensor) -> torch.Tensor:
    return probs.log().unsqueeze(0)  # [1, V]


def test_spread_number_mass_beats_one_likelier_other_token() -> None:
    # 97 % on numbers, spread so that no number reaches the space's 2 %: plain greedy
    # answers with a space, number-first with the most probable number.
    probs = torch.full((1010,), 0.01 / 9)
    probs[SPACE] = 0.02
    probs[10:] = 0.97 / 1000
    probs[10 + 317] = 0.97 / 1000 * 1.5
    probs /= probs.sum()
    scores = logits_from(probs)
    assert int(scores.argmax()) == SPACE
    out = NumberFirstProcessor(VOCAB)(torch.zeros((1, 1), dtype=torch.long), scores.clone())
    assert int(out.argmax()) == 10 + 317
    assert torch.isinf(out[0, :10]).all() and not torch.isinf(out[0, 10:]).any()
    assert torch.equal(out[0, 10:], scores[0, 10:])  # the numbers' own order is untouched


def test_a_likelier_other_token_is_left_alone_row_by_row() -> None:
    ending = torch.full((1010,), 0.3 / 1000)
    ending[:10] = 0.0
    ending[0] = 0.7  # end of text beats all numbers together
    spread = torch.full((1010,), 0.9 / 1000)
    spread[:10] = 0.1 / 10
    scores = torch.cat([logits_from(ending), logits_from(spread)])  # [2, V]
    out = NumberFirstProcessor(VOCAB)(torch.zeros((2, 1), dtype=torch.long), scores.clone())
    assert torch.equal(out[0], scores[0])
    assert out[1].argmax() >= 10 and math.isinf(float(out[1, 0]))


def test_a_head_wider_than_the_tokenizer_and_bf16_scores() -> None:
    scores = torch.zeros((1, 1030), dtype=torch.bfloat16)  # padded head: 20 extra rows
    scores[0, 1020] = 5.0  # an unused row, likelier than any single number
    out = NumberFirstProcessor(VOCAB)(torch.zeros((1, 1), dtype=torch.long), scores.clone())
    assert out.dtype == torch.bfloat16
    assert 10 <= int(out.argmax()) < 1010  # 1,000 numbers at e^0 outweigh one at e^5


def test_generate_answers_groups_numbers_and_plain_greedy_does_not() -> None:
    # A zeroed (tied) head gives every token the same probability: plain greedy takes the
    # lowest id, a special token, and answers nothing; the ten digit tokens together are
    # ten times likelier than any one other token, so number-first answers with digits.
    model, tokenizer = load_model_and_tokenizer(ModelSpec(source="random:tiny-digit"), seed=0)
    with torch.no_grad():
        model.get_output_embeddings().weight.zero_()
    questions = [Example(prompt="How many seconds in 1 min?", answer="60")]
    kwargs: dict[str, Any] = {"max_new_tokens": 3, "batch_size": 1, "use_chat_template": False}
    assert (
        parse_number(generate_answers(model, tokenizer, questions, number_first=False, **kwargs)[0])
        is None
    )
    assert generate_answers(model, tokenizer, questions, **kwargs) == ["000"]
    # Serving's predict decodes the same way (a checkpoint's train.eval_decoding picks it).
    for number_first, value in ((True, 0.0), (False, None)):
        predictor = NumericPredictor(
            model, tokenizer, use_chat_template=False, number_first=number_first
        )
        answer = predictor.predict([questions[0].prompt], max_new_tokens=3, samples=0)[0]
        assert answer.value == value, (number_first, answer.text)
