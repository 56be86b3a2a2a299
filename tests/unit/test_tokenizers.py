"""Real tokenizers from the asset packages: number tokens, and losses on a real answer."""

from __future__ import annotations

import pytest
import torch

from jobs.data import Example
from jobs.data.tokenize import IGNORE, encode_example
from jobs.losses import NoNumericTokensError, NumericVocab, build_loss, shift_labels
from jobs.losses.vocab import numeric_text
from jobs.modeling.presets import PRESET_TOKENIZERS
from jobs.modeling.tokenizers import TOKENIZER_NAMES, load_tokenizer, package_dir
from jobs.spec import MULTI_DIGIT_PRESETS, LossSpec

# Numeric tokens of each original tokenizer, as the numeric-loss issue counted them.
COUNTS = {"qwen2.5": 10, "llama3": 1110, "gpt2": 1691, "smollm2": 10, "char": 10, "char3": 1110}
WITH_CHAT_TEMPLATE = {"qwen2.5", "smollm2"}


def test_every_tokenizer_is_covered() -> None:
    assert set(TOKENIZER_NAMES) == set(COUNTS)


@pytest.mark.parametrize(("name", "count"), COUNTS.items())
def test_numeric_vocab_sizes(name: str, count: int) -> None:
    tok = load_tokenizer(name)
    vocab = NumericVocab.from_tokenizer(tok)
    assert len(vocab) == count
    for token_id, value in zip(vocab.token_ids, vocab.values, strict=True):
        text = numeric_text(tok.convert_ids_to_tokens(token_id))
        assert text is not None and int(text) == value


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_special_tokens_and_chat_template_as_the_source_has_them(name: str) -> None:
    tok = load_tokenizer(name)
    assert tok.eos_token_id is not None and tok.pad_token_id is not None
    assert bool(tok.chat_template) == (name in WITH_CHAT_TEMPLATE)


def test_gpt2_space_marked_number_tokens() -> None:
    tok = load_tokenizer("gpt2")
    marked = [t for t in tok.get_vocab() if t.startswith("Ġ") and numeric_text(t)]
    assert len(marked) == 697
    assert len(tok) == 50257 and tok.eos_token_id == 50256


def test_gpt2_conversion_matches_tiktoken_on_the_same_ranks() -> None:
    # Independent reference: tiktoken itself, on whisper's ranks, with its own GPT-2 regex.
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext.openai_public import r50k_pat_str

    ranks = load_tiktoken_bpe(str(package_dir("whisper") / "assets" / "gpt2.tiktoken"))
    reference = tiktoken.Encoding(
        "gpt2-local", pat_str=r50k_pat_str, mergeable_ranks=ranks, special_tokens={}
    )
    tok = load_tokenizer("gpt2")
    for text in ["317 * 24 = 7608", "It's 13:15, ok?  Ünïcode — 1234567890123", " -0.25\n\n1/9"]:
        assert tok(text)["input_ids"] == reference.encode(text)


def test_llama3_chunks_numbers_left_to_right() -> None:
    tok = load_tokenizer("llama3")
    assert tok.tokenize("1000000") == ["100", "000", "0"]
    vocab = NumericVocab.from_tokenizer(tok)
    assert max(vocab.values) == 999 and set(vocab.digit_lengths) == {1, 2, 3}


def test_char3_numbers_are_llama3_numbers() -> None:
    """The small char3 vocabulary has LLaMA-3's number tokens and chunks numbers alike."""
    char3, llama3 = load_tokenizer("char3"), load_tokenizer("llama3")
    for text in ("1000000", "7", "1234", "What is 05 + 317?"):
        numbers = [t for t in char3.tokenize(text) if numeric_text(t)]
        assert numbers == [t for t in llama3.tokenize(text) if numeric_text(t.lstrip("Ġ"))]
    assert len(char3) < 1300 and len(load_tokenizer("char")) < 128


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
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


def _peaked(labels: torch.Tensor, predicted: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """[1, T, V] logits putting all mass (fp32: exactly) on `predicted` [1, T]."""
    logits = torch.full((*labels.shape, vocab_size), -1e4)
    logits.scatter_(2, predicted.clamp(min=0).unsqueeze(-1), 1e4)
    return logits


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_losses_on_a_real_tokenized_arithmetic_answer(name: str) -> None:
    tok = load_tokenizer(name)
    vocab = NumericVocab.from_tokenizer(tok)
    row = encode_example(tok, Example("What is 317 * 24?", "7608"), 96, use_chat_template=False)
    labels = shift_labels(torch.tensor([row["labels"]]))  # [1, T] aligned targets
    numeric_ids = set(vocab.token_ids)
    targets = [t for t in labels[0].tolist() if t != IGNORE and t in numeric_ids]
    assert tok.decode(targets).replace(" ", "") == "7608"

    # Off by one: at each numeric target predict a number token worth one more. Each
    # such position then costs exactly |Δ| = 1 in EMD and 1² in NTL-MSE (on the absolute
    # scale; `auto` would measure multi-digit vocabularies on log(1 + v)).
    value_of = dict(zip(vocab.token_ids, vocab.values, strict=True))
    by_value = {v: i for i, v in value_of.items()}
    off = labels.clone()
    for t, y in enumerate(labels[0].tolist()):
        if y in numeric_ids:
            off[0, t] = by_value[value_of[y] + 1]

    absolute = {"distance": "absolute"}
    for spec, expected in [
        (LossSpec(name="emd", **absolute), 1.0),
        (LossSpec(name="ntl_mse", **absolute), 1.0),
    ]:
        loss = build_loss(spec, vocab)
        right = loss(_peaked(labels, labels, len(tok)), labels)
        wrong = loss(_peaked(labels, off, len(tok)), labels)
        assert right.numeric.item() == pytest.approx(0.0, abs=1e-6)
        assert right.ce.item() == pytest.approx(0.0, abs=1e-3)
        assert wrong.numeric.item() == pytest.approx(expected, rel=1e-5)
        # total = ce + λ·numeric with the default λ = 0.3 (ce is ~1e4 here: fp32 ulp ~1e-3).
        assert (wrong.total - wrong.ce).item() == pytest.approx(0.3 * expected, abs=1e-2)
    for name_ in ("mmd", "smmd", "ntil"):
        loss = build_loss(LossSpec(name=name_, ntil_value="expectation"), vocab)
        good = loss(_peaked(labels, labels, len(tok)), labels).numeric.item()
        bad = loss(_peaked(labels, off, len(tok)), labels).numeric.item()
        assert 0 <= good < bad, name_


def test_the_multi_digit_presets_are_those_without_exactly_ten_digit_tokens() -> None:
    """The spec refuses digit-level losses for MULTI_DIGIT_PRESETS without loading a tokenizer:
    the list must be what the tokenizers say."""
    multi = {
        preset
        for preset, name in PRESET_TOKENIZERS.items()
        if not NumericVocab.from_tokenizer(load_tokenizer(name)).digits_only
    }
    assert multi == set(MULTI_DIGIT_PRESETS)


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_the_vocab_learns_the_decimal_point(name: str) -> None:
    tok = load_tokenizer(name)
    vocab = NumericVocab.from_tokenizer(tok)
    assert vocab.point_id is not None and tok.decode([vocab.point_id]) == "."
    assert tok("3.5", add_special_tokens=False)["input_ids"].count(vocab.point_id) == 1
