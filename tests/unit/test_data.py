"""Tasks generate deterministically, cache, and refuse bad rows by line number."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest

from jobs.data import DataError, Example, load_task
from jobs.data.arithmetic import EXTRAPOLATE, arithmetic_examples
from jobs.data.clock import clock_examples, minutes_off
from jobs.data.jsonl import read_jsonl
from jobs.data.tokenize import IGNORE, collate, collate_prompts, encode_example, encode_prompt
from jobs.modeling.tokenizers import load_tokenizer
from jobs.spec import ARITHMETIC_MODULES, DataSpec


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMTUNE_HOME", str(tmp_path / "home"))


@pytest.mark.parametrize("module", ARITHMETIC_MODULES)
@pytest.mark.parametrize("split", ["train", "interpolate", "extrapolate"])
def test_every_arithmetic_module_generates(module: str, split: str) -> None:
    rows = arithmetic_examples(module, split, 5, seed=1)
    assert len(rows) == 5
    assert all(r.prompt and r.answer for r in rows)


def test_extrapolation_covers_every_module() -> None:
    assert set(EXTRAPOLATE) == set(ARITHMETIC_MODULES)


def test_generation_is_seeded_and_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    first = arithmetic_examples("add_or_sub", "train", 200, seed=3)

    def generate_again(*args: object) -> None:
        raise AssertionError(f"generated again: {args}")

    with monkeypatch.context() as patch:
        patch.setattr("jobs.data.arithmetic._generate", generate_again)
        again = arithmetic_examples("add_or_sub", "train", 200, seed=3)  # from the cache
    assert first == again
    assert arithmetic_examples("add_or_sub", "train", 200, seed=4) != first


def test_fresh_generation_repeats_without_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = arithmetic_examples("mixed", "interpolate", 20, seed=0)
    monkeypatch.setenv("NUMTUNE_HOME", str(tmp_path / "other"))
    assert arithmetic_examples("mixed", "interpolate", 20, seed=0) == first


def test_arithmetic_task_keeps_evaluation_unseen() -> None:
    task = load_task(DataSpec(modules=("add_or_sub", "mul"), train_size=300, eval_size=40))
    assert len(task.train) == 300 and len(task.eval) == 40
    assert not {e.prompt for e in task.eval} & {e.prompt for e in task.train}


def _clock_answer(prompt: str) -> str:
    hours, minutes, hh, mm = map(int, re.findall(r"\d+", prompt))
    start = dt.datetime(2000, 1, 10, hh, mm)
    gap = dt.timedelta(hours=hours, minutes=minutes)
    return (start + gap if "after" in prompt else start - gap).strftime("%H:%M")


@pytest.mark.parametrize("split", ["train", "extrapolate"])
def test_clock_answers_match_datetime(split: str) -> None:
    rows = clock_examples(split, 200, seed=5)
    assert all(row.answer == _clock_answer(row.prompt) for row in rows)
    hours = [int(re.findall(r"\d+", r.prompt)[0]) for r in rows]
    assert (max(hours) < 12) if split == "train" else (min(hours) >= 12)


@pytest.mark.parametrize(
    ("a", "b", "off"), [(0, 0, 0), (10, 50, 40), (23 * 60 + 50, 10, 20), (0, 12 * 60, 720)]
)
def test_minutes_off_wraps_around_midnight(a: int, b: int, off: int) -> None:
    assert minutes_off(a, b) == off == minutes_off(b, a)


BAD_ROWS = [
    ('{"prompt": "a", "answer": "1"}\n{"prompt": "b"\n', 2, "not valid JSON"),
    ('{"prompt": "a"}\n', 1, "'answer'"),
    ('{"answer": "1"}\n', 1, "'prompt'"),
    ('{"prompt": "", "answer": "1"}\n', 1, "'prompt'"),
    ('{"prompt": "a", "answer": ""}\n', 1, "empty"),
    ('{"prompt": "a", "answer": [1]}\n', 1, "'answer'"),
    ('{"prompt": "a", "answer": true}\n', 1, "'answer'"),
    ('["a", "1"]\n', 1, "JSON object"),
    ('{"prompt": "a", "answer": 1}\n\n{"prompt": 5, "answer": 2}\n', 3, "'prompt'"),
]


@pytest.mark.parametrize(("text", "line", "needle"), BAD_ROWS)
def test_bad_jsonl_rows_name_their_line(tmp_path: Path, text: str, line: int, needle: str) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(text)
    with pytest.raises(DataError, match=rf"rows\.jsonl:{line}: .*{re.escape(needle)}"):
        read_jsonl(path)


def test_good_jsonl_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps({"prompt": f"q{i}", "answer": i}) for i in range(10)))
    task = load_task(DataSpec(task="jsonl", path=str(path), eval_size=3))
    assert len(task.train) == 7 and len(task.eval) == 3
    assert {e.answer for e in task.train + task.eval} == {str(i) for i in range(10)}
    with pytest.raises(DataError, match="no such file"):
        read_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(DataError, match="eval_size"):
        load_task(DataSpec(task="jsonl", path=str(path), eval_size=10))


def test_gsm_problems_have_numeric_answers() -> None:
    task = load_task(DataSpec(task="gsm", eval_size=20))
    rows = task.train + task.eval
    assert len(rows) >= 95
    assert all(re.fullmatch(r"-?\d+(\.\d+)?", r.answer) for r in rows)


@pytest.mark.parametrize("chat", [False, True])
def test_labels_cover_exactly_the_answer(chat: bool) -> None:
    tok = load_tokenizer("qwen2.5")
    example = Example("What is 317 * 24?", "7608")
    row = encode_example(tok, example, 128, use_chat_template=chat)
    answer_ids = [t for t in row["labels"] if t != IGNORE]
    n_prompt = row["labels"].index(answer_ids[0])
    assert row["input_ids"][:n_prompt] == encode_prompt(tok, example.prompt, chat)
    assert row["input_ids"][n_prompt:] == answer_ids
    assert tok.decode(answer_ids[:-1]).strip() == "7608"
    assert answer_ids[-1] == tok.eos_token_id
    if chat:
        assert "<|im_start|>" in tok.decode(row["input_ids"][:n_prompt])


def test_too_long_examples_are_refused_not_cut() -> None:
    tok = load_tokenizer("qwen2.5")
    with pytest.raises(DataError, match=r"data\.max_length"):
        encode_example(tok, Example("x " * 50, "1"), 16, use_chat_template=False)


def test_collate_pads_right_and_prompts_pad_left() -> None:
    rows = [{"input_ids": [1, 2, 3], "labels": [IGNORE, 2, 3]}, {"input_ids": [4], "labels": [4]}]
    batch = collate(rows, pad_id=0)
    assert batch["input_ids"].tolist() == [[1, 2, 3], [4, 0, 0]]
    assert batch["labels"].tolist() == [[IGNORE, 2, 3], [4, IGNORE, IGNORE]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    left = collate_prompts([[1, 2, 3], [4]], pad_id=0)
    assert left["input_ids"].tolist() == [[1, 2, 3], [0, 0, 4]]
    assert left["attention_mask"].tolist() == [[1, 1, 1], [0, 0, 1]]
