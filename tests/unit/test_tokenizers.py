"""Real tokenizers from the asset packages: number tokens, and a loss on a real answer."""

from __future__ import annotations

import pytest
import torch

from jobs.data import Example
from jobs.data.tokenize import IGNORE, encode_example
from jobs.losses import NoNumericTokensError, NumericVocab, build_loss, shift_labels
from jobs.losses.vocab import numeric_text
from jobs.spec import LossSpec
from jobs.tokenizers import load_tokenizer

COUNTS = {"qwen2.5": 10, "llama3": 1110, "gpt2": 1691, "smollm2": 10}


@pytest.mark.parametrize(("name", "count"), COUNTS.items())
def test_numeric_vocab_sizes(name: str, count: int) -> None:
    vocab = NumericVocab.from_tokenizer(load_tokenizer(name))
    assert len(vocab) == count
    tok = load_tokenizer(name)
    for token_id, value in zip(vocab.token_ids, vocab.values, strict=True):
        text = numeric_text(tok.convert_ids_to_tokens(token_id))
        assert text is not None and int(text) == value


def test_gpt2_space_marked_number_tokens() -> None:
    tok = load_tokenizer("gpt2")
    marked = [t for t in tok.get_vocab() if t.startswith("Ġ") and numeric_text(t)]
    assert len(marked) == 697


def test_llama3_chunks_numbers_left_to_right() -> None:
    tok = load_tokenizer("llama3")
    assert tok.tokenize("1000000") == ["100", "000", "0"]
    vocab = NumericVocab.from_tokenizer(tok)
    assert max(vocab.values) == 999 and set(vocab.digit_lengths) == {1, 2, 3}


@pytest.mark.parametrize("name", list(COUNTS))
def test_round_trip(name: str) -> None:
    tok = load_tokenizer(name)
    ids = tok("317 * 24 = 7608", add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == "317 * 24 = 7608"


@pytest.mark.parametrize(
    ("token", "text"),
    [
        ("7", "7"),
        ("Ġ42", "42"),
        ("▁05", "05"),
        (" 9", "9"),
        ("ĠĠ1", None),
        ("4a", None),
        ("²", None),
        ("٣", None),
        ("", None),
        ("Ġ", None),
        ("-1", None),
        ("1.5", None),
    ],
)
def test_what_counts_as_a_number_token(token: str, text: str | None) -> None:
    assert numeric_text(token) == text


def test_tokenizer_without_numbers_is_refused() -> None:
    class Letters:
        def get_vocab(self) -> dict[str, int]:
            return {"a": 0, "b": 1}

    with pytest.raises(NoNumericTokensError, match="no number tokens"):
        NumericVocab.from_tokenizer(Letters())


@pytest.mark.parametrize("name", list(COUNTS))
def test_loss_on_a_real_tokenized_arithmetic_answer(name: str) -> None:
    tok = load_tokenizer(name)
    vocab = NumericVocab.from_tokenizer(tok)
    row = encode_example(tok, Example("What is 317 * 24?", "7608"), 64, use_chat_template=False)
    input_ids = torch.tensor([row["input_ids"]])
    labels = shift_labels(torch.tensor([row["labels"]]))
    numeric_targets = [t for t in labels[0].tolist() if t != IGNORE and t in set(vocab.token_ids)]
    assert tok.decode(numeric_targets).replace(" ", "") == "7608"

    # A model that puts its mass on the right digits scores lower than one that is off by one.
    right = torch.full((1, input_ids.shape[1], len(tok)), -5.0)
    right.scatter_(2, labels.clamp(min=0).unsqueeze(-1), 5.0)
    near = right.clone()
    for t in range(labels.shape[1]):
        y = int(labels[0, t])
        if y in vocab.token_ids:
            wrong = vocab.token_ids[(vocab.token_ids.index(y) + 1) % len(vocab)]
            near[0, t, y], near[0, t, wrong] = -5.0, 5.0
    loss = build_loss(LossSpec(name="ntil", ntil_value="expectation"), vocab)
    good, bad = loss(right, labels), loss(near, labels)
    assert 0 <= good.numeric.item() < bad.numeric.item()
    assert torch.isfinite(bad.total)
