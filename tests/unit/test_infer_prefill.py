"""K samples, one prefill (jobs/infer/generation.py): each prompt is run through the model
once, its K samples decode from a copy of that KV cache repeated K times, and the greedy
answer, the numeric decodings and seeded samples are what plain generate() gives.

Every forward call of the model is recorded as (rows, positions) of its input_ids.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from transformers import GenerationConfig, LogitsProcessorList

from jobs.infer import NumericPredictor
from jobs.infer.decoding import answer_line
from jobs.infer.generation import expanded, prefill
from jobs.losses.vocab import NumericVocab
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import ModelSpec
from tests.support.bench import load

TINY = ModelSpec(source="random:tiny-digit")
PROMPTS = ["What is 1 + 1?", "Compute 317 - 24, please.", "7 + 8?"]  # unequal: left padding


def predictor(*, digits_only: bool) -> NumericPredictor:
    """The tiny random model; with digits_only, every generated token is a digit (no eos),
    so each decoding runs all max_new_tokens steps."""
    model, tok = load_model_and_tokenizer(TINY, seed=0)
    if digits_only:
        bias = torch.zeros(len(tok))
        bias[NumericVocab.from_tokenizer(tok).token_ids] = 30.0
        model.lm_head.register_forward_hook(lambda module, inputs, output: output + bias)
    return NumericPredictor(model, tok, use_chat_template=False)


@pytest.fixture(scope="module")
def digits() -> Iterator[NumericPredictor]:
    yield predictor(digits_only=True)


class Forwards:
    """(rows, positions) of each forward call's input_ids while the block runs."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.calls: list[tuple[int, int]] = []

    def __enter__(self) -> Forwards:
        def record(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
            self.calls.append(tuple(kwargs["input_ids"].shape))  # type: ignore[arg-type]

        self.handle = self.model.register_forward_pre_hook(record, with_kwargs=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.remove()


def prompt_width(p: NumericPredictor) -> int:
    return int(p._batch(PROMPTS, chat=True)["input_ids"].shape[1])  # T of the padded batch


def test_predict_runs_each_prompt_once_and_gives_k_samples(
    digits: NumericPredictor, monkeypatch: pytest.MonkeyPatch
) -> None:
    b, t, k, new = len(PROMPTS), prompt_width(digits), 8, 3
    rows: list[int] = []  # input rows of each model.generate() call
    plain = digits.model.generate

    def counted(**kwargs: Any) -> Any:
        rows.append(int(kwargs["input_ids"].shape[0]))
        return plain(**kwargs)

    monkeypatch.setattr(digits.model, "generate", counted)
    with Forwards(digits.model) as seen:
        out = digits.predict(PROMPTS, max_new_tokens=new, samples=k, seed=0)
    assert all(p.parsed_samples == k and p.samples == k for p in out)
    assert rows == [b * k + b]  # one generate() for the greedy answers and the samples
    # One forward over the prompts ([B, T − 1]); then one decoding pass whose every step
    # runs one position of the sampled rows (B·K) and the greedy rows (B) together.
    assert seen.calls == [(b, t - 1)] + [(b * k + b, 1)] * new
    processed = sum(rows * positions for rows, positions in seen.calls)
    assert processed == b * (t - 1) + b * (1 + k) * new  # before: B·T·(1 + K) for the prompts


# digits_only False: some rows end early; True: every sample is a number.
@pytest.mark.parametrize(("decoding", "digits_only"), [("greedy", False), ("median", True)])
def test_one_pass_gives_the_greedy_answer_and_the_samples_of_separate_passes(
    decoding: str, digits_only: bool
) -> None:
    model = predictor(digits_only=digits_only)
    kwargs: dict[str, Any] = {"max_new_tokens": 4, "temperature": 1.5, "seed": 11}
    out = model.predict(PROMPTS, samples=6, decoding=decoding, **kwargs)  # type: ignore[arg-type]
    alone = model.predict(PROMPTS, samples=0, decoding=decoding, max_new_tokens=4)  # type: ignore[arg-type]
    assert [(p.text, p.tokens) for p in out] == [(p.text, p.tokens) for p in alone]
    # The K samples are those a pass of the K rows alone draws with the seed (calibration's).
    drawn = model.sampled_numbers(PROMPTS, samples=6, **kwargs)
    assert [p.sampled_values for p in out] == drawn
    if digits_only:  # real draws, not one value repeated
        assert all(len(set(values)) > 1 for values in drawn)
    again = model.predict(PROMPTS, samples=6, decoding=decoding, **kwargs)  # type: ignore[arg-type]
    assert again == out


@pytest.mark.parametrize("decoding", ["greedy", "expected", "median"])
def test_greedy_and_numeric_decodings_match_plain_generate(decoding: str) -> None:
    plain = predictor(digits_only=False)  # its own preferences: some rows end early
    batch = plain._batch(PROMPTS, chat=True)
    config = GenerationConfig(
        max_new_tokens=6, do_sample=False, eos_token_id=plain.tokenizer.eos_token_id,
        pad_token_id=plain.tokenizer.pad_token_id,
    )  # fmt: skip
    # The predictor's greedy decodes number-first, as evaluation does (plain.greedy).
    numeric = [] if decoding == "greedy" else [plain.processors[decoding]]
    processors = [*plain.greedy, *numeric]
    with torch.no_grad():
        ids = plain.model.generate(
            **batch, generation_config=config, logits_processor=LogitsProcessorList(processors)
        )[:, batch["input_ids"].shape[1] :]
    expected = [answer_line(plain.tokenizer, ids) for ids, _ in plain._split(ids)]
    out = plain.predict(PROMPTS, max_new_tokens=6, decoding=decoding, samples=4, seed=0)  # type: ignore[arg-type]
    assert [(p.text, p.tokens) for p in out] == expected


def test_numeric_decodings_draw_no_samples(digits: NumericPredictor) -> None:
    b = len(PROMPTS)
    with Forwards(digits.model) as seen:
        alone = digits.predict(PROMPTS, max_new_tokens=3, decoding="expected", samples=0)
    assert all(rows == b for rows, _ in seen.calls)  # no repeated rows: nothing sampled
    assert all(p.value is not None and p.expected_value is None for p in alone)
    with_k = digits.predict(PROMPTS, max_new_tokens=3, decoding="expected", samples=6, seed=2)
    assert [p.text for p in with_k] == [p.text for p in alone]  # K changes only the statistics


def test_prefill_stops_one_position_short_and_expands_per_prompt(digits: NumericPredictor) -> None:
    batch = digits._batch(PROMPTS, chat=True)
    cache = prefill(digits.model, batch)
    assert cache is not None and cache.get_seq_length() == batch["input_ids"].shape[1] - 1
    keys = cache.layers[0].keys  # [B, heads, T − 1, head_dim]
    wide = expanded(cache, 3)
    assert wide is not None and torch.equal(wide.layers[0].keys, keys.repeat_interleave(3, 0))
    assert cache.layers[0].keys is keys  # the shared cache itself is left as it was
    one_token = {k: v[:, -1:] for k, v in batch.items()}  # [B, 1]: nothing to share
    assert prefill(digits.model, one_token) is None and expanded(None, 3) is None


def tiny_bench(name: str, tmp_path: Path) -> tuple[ModuleType, dict[str, Any]]:
    """bench/NAME.py run once on the tiny model, 2 new tokens; its plot drawn."""
    bench = load(name)
    args = argparse.Namespace(rounds=1, threads=1, max_new_tokens=2, model=TINY.source)
    result = bench.run(args)
    bench.plot(result, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 0
    return bench, result


def test_sample_prefill_bench_runs_at_a_tiny_size(tmp_path: Path) -> None:
    bench, result = tiny_bench("sample_prefill", tmp_path)
    assert len(result["rows"]) == 4 and set(result["k8_over_k1"]) == set(bench.WAYS)
    # Same seed, same samples: the two ways give the same estimate in each round.
    by_way = {(r["way"], r["K"]): r["estimate"] for r in result["rows"]}
    for k in bench.KS:
        assert by_way["one prefill", k] == pytest.approx(by_way["K prefills (before)", k])


def test_sample_one_pass_bench_runs_at_a_tiny_size(tmp_path: Path) -> None:
    bench, result = tiny_bench("sample_one_pass", tmp_path)
    assert len(result["rows"]) == 2 * len(bench.CELLS)
    assert set(result["k16_over_k1"]) == set(bench.WAYS)
    # fp32: the one pass gives the greedy answers of the two passes.
    assert result["differ"] == []
    assert result["same_greedy_answers"].startswith(f"{len(bench.CELLS)} of")
