"""NumericPredictor on vLLM (jobs/engines): the bundled SmolLM2-135M decoded by a real vLLM
worker from `.venv-vllm` (which `make setup` builds), against transformers' generate() on
the same weights, both in float32 so greedy answers must agree token for token."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from ray.serve import batching

from jobs.engines.vllm_engine import EngineConfig
from jobs.infer import NumericPredictor
from jobs.infer.decoding import answer_line
from jobs.modeling.folders import bundled_dir
from tests.support.fairness import check_one_call_wait, eight_heavy_then_one_small
from tests.support.serving import smollm2_lora

pytestmark = pytest.mark.slow

FP32 = EngineConfig(dtype="float32", max_lora_rank=8)  # LoRA on: base answers unchanged
QUESTIONS = [
    "What is 12 + 7?", "Reply with digits only: 317 * 24 =", "Number only: 45 / 9",
    "Give a random number between 1 and 100.", "How many minutes in an hour? Digits only.",
    "How many legs does a spider have? Answer: ", "2 + 2 =", "What is 15% of 80?",
]  # fmt: skip


@pytest.fixture(scope="module")
def folder() -> Path:
    return bundled_dir("smollm2-135m")  # converted from the bundled GGUF once per machine


@pytest.fixture(scope="module")
def hf(folder: Path) -> NumericPredictor:
    return NumericPredictor.from_checkpoint(folder)


@pytest.fixture(scope="module")
def vllm(folder: Path, hf: NumericPredictor) -> Iterator[NumericPredictor]:
    predictor = NumericPredictor.from_spec(folder, None, model=hf.model, engine=FP32)
    assert predictor.engine is not None, "vLLM did not start: see the log above"
    yield predictor
    predictor.close()


def test_greedy_answers_are_generates_with_and_without_number_first(
    hf: NumericPredictor, vllm: NumericPredictor
) -> None:
    on_vllm = [p.text for p in vllm.predict(QUESTIONS, max_new_tokens=8, samples=0)]
    assert on_vllm == [p.text for p in hf.predict(QUESTIONS, max_new_tokens=8, samples=0)]
    # Without number-first (vLLM's rows straight from the engine): generate()'s plain greedy.
    plain = NumericPredictor(hf.model, hf.tokenizer, number_first=False)
    expected = [p.text for p in plain.predict(QUESTIONS, max_new_tokens=8, samples=0)]
    assert vllm.engine is not None
    rows, _ = vllm.engine.decode(vllm._encode(QUESTIONS, chat=True), max_new_tokens=8, greedy=True)
    assert [answer_line(hf.tokenizer, ids)[0] for ids, _ in rows] == expected
    assert on_vllm != expected, "number-first changed no answer: the check above tests nothing"


def test_numeric_decodings_are_generates(hf: NumericPredictor, vllm: NumericPredictor) -> None:
    greedy = [p.text for p in hf.predict(QUESTIONS, max_new_tokens=8, samples=0)]
    changed = 0
    for mode in ("expected", "median"):
        expected = hf.predict(QUESTIONS, max_new_tokens=8, samples=0, decoding=mode)
        got = vllm.predict(QUESTIONS, max_new_tokens=8, samples=0, decoding=mode)
        assert [p.text for p in got] == [p.text for p in expected], mode
        changed += sum(p.text != g for p, g in zip(expected, greedy, strict=True))
    assert changed, "no numeric decoding changed an answer: the checks above test nothing"


def test_seeded_samples_repeat_and_are_calibrations(vllm: NumericPredictor) -> None:
    first = vllm.predict(QUESTIONS[:3], max_new_tokens=6, samples=6, seed=3)
    again = vllm.predict(QUESTIONS[:3], max_new_tokens=6, samples=6, seed=3)
    assert [p.sampled_values for p in first] == [p.sampled_values for p in again]
    assert all(p.samples == 6 and p.parsed_samples == len(p.sampled_values) for p in first)
    # calibration's draws (sampled_numbers) are predict's for the same seed
    drawn = vllm.sampled_numbers(QUESTIONS[:3], samples=6, max_new_tokens=6, seed=3)
    assert drawn == [p.sampled_values for p in first]
    assert vllm.engine is not None
    encoded = vllm._encode(QUESTIONS[:1], chat=True)
    _, three = vllm.engine.decode(encoded, max_new_tokens=6, greedy=False, samples=6, seed=3)
    _, four = vllm.engine.decode(encoded, max_new_tokens=6, greedy=False, samples=6, seed=4)
    assert three != four
    for p in first:  # the statistics are numtune's read-out of those samples
        if p.sampled_values:
            assert min(p.sampled_values) <= p.expected_value <= max(p.sampled_values)


def test_completions_are_generates(hf: NumericPredictor, vllm: NumericPredictor) -> None:
    prompts = ["12 + 7 =", "The capital of France is"]
    assert vllm.complete(prompts, max_new_tokens=5) == hf.complete(prompts, max_new_tokens=5)
    sampled = vllm.complete(prompts, max_new_tokens=5, temperature=0.8, seed=1)
    assert sampled == vllm.complete(prompts, max_new_tokens=5, temperature=0.8, seed=1)
    assert all(c.prompt_tokens > 0 and 1 <= c.completion_tokens <= 5 for c in sampled)


def test_streamed_completions_join_to_the_completion(
    hf: NumericPredictor, vllm: NumericPredictor
) -> None:
    asks: list[tuple[str, dict[str, Any]]] = [
        ("12 + 7 =", {}), ("Say hi.", {"chat": True}),  # the second ends on end-of-text
        ("Tell me a number:", {"temperature": 0.8, "seed": 3}),
    ]  # fmt: skip
    for prompt, options in asks:
        pieces = list(vllm.stream(prompt, max_new_tokens=12, **options))
        [done] = vllm.complete([prompt], max_new_tokens=12, **options)
        assert len(pieces) > 1 and "".join(pieces) == done.text, (pieces, done)
    greedy = "".join(hf.stream("12 + 7 =", max_new_tokens=12))
    assert "".join(vllm.stream("12 + 7 =", max_new_tokens=12)) == greedy
    early = vllm.stream("Count: 1, 2,", max_new_tokens=20)
    next(early)
    early.close()  # a consumer that stops early: the next call is answered as ever
    assert vllm.complete(["12 + 7 ="], max_new_tokens=5) == hf.complete(
        ["12 + 7 ="], max_new_tokens=5
    )


def test_a_lora_adapter_decodes_as_peft_does(tmp_path: Path, vllm: NumericPredictor) -> None:
    peft = NumericPredictor.from_checkpoint(smollm2_lora(tmp_path / "lora"))  # generate()
    expected = [p.text for p in peft.predict(QUESTIONS, max_new_tokens=8, samples=0)]
    assert vllm.engine is not None
    peft.use_engine(vllm.engine, lora=("a", 1, str(tmp_path / "lora")), owned=False)
    assert [p.text for p in peft.predict(QUESTIONS, max_new_tokens=8, samples=0)] == expected
    base = [p.text for p in vllm.predict(QUESTIONS, max_new_tokens=8, samples=0)]
    assert base != expected, "the adapter changed no answer: the check above tests nothing"
    peft.close()
    assert vllm.engine.proc.poll() is None  # not its to close: the base's worker runs on


def test_owners_take_turns_on_vllm(monkeypatch: pytest.MonkeyPatch, vllm: NumericPredictor) -> None:
    """The replica's turns hold on vLLM (tests/support/fairness.py's scenario): bob waits
    for at most about the one call of ann's in progress, not for her eight."""
    # Outside a replica serve.batch cannot read max_ongoing_requests for its warning.
    monkeypatch.setattr(
        batching._BatchQueue, "_warn_if_max_batch_size_exceeds_max_ongoing_requests", lambda _: None
    )
    check_one_call_wait(eight_heavy_then_one_small(vllm))
    assert vllm.engine is not None  # it ran on vLLM throughout


def test_a_deadline_stops_the_rows_where_they_are(vllm: NumericPredictor) -> None:
    with vllm.time_limit(0.0):
        out = vllm.predict(QUESTIONS[:2], max_new_tokens=64, samples=4, seed=0)
    assert all(len(p.tokens) < 64 for p in out)


def test_the_worker_listens_on_loopback_only(vllm: NumericPredictor) -> None:
    """vLLM's processes talk over local TCP sockets: none of them may face the network."""
    assert vllm.engine is not None
    worker = psutil.Process(vllm.engine.proc.pid)
    tree = [worker, *worker.children(recursive=True)]
    listening = [
        c.laddr.ip for p in tree for c in p.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]  # fmt: skip
    assert listening and all(ip in ("127.0.0.1", "::1") for ip in listening), listening


def test_without_vllms_environment_generate_answers(folder: Path, hf: NumericPredictor) -> None:
    # (A model vLLM cannot run, the tiny test models: tests/integration/test_vllm_serving.py.)
    missing = EngineConfig(python=str(folder / "no-such-python"))
    predictor = NumericPredictor.from_spec(folder, None, model=hf.model, engine=missing)
    assert predictor.engine is None
    [p] = predictor.predict(QUESTIONS[:1], max_new_tokens=8, samples=0)
    assert p.text == hf.predict(QUESTIONS[:1], max_new_tokens=8, samples=0)[0].text


def test_a_worker_that_dies_leaves_generate_to_answer(
    hf: NumericPredictor, vllm: NumericPredictor
) -> None:
    """Last in the module: it ends the module's worker."""
    assert vllm.engine is not None
    worker = vllm.engine.proc
    engine_processes = psutil.Process(worker.pid).children(recursive=True)  # vLLM's own
    assert engine_processes
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)
    # Its watchdog ends vLLM's engine processes too: nothing holds the model's memory.
    _, alive = psutil.wait_procs(engine_processes, timeout=30)
    assert not alive, alive
    out = vllm.predict(QUESTIONS[:2], max_new_tokens=8, samples=0)
    assert vllm.engine is None  # dropped: generate() answers from now on
    expected = hf.predict(QUESTIONS[:2], max_new_tokens=8, samples=0)
    assert [p.text for p in out] == [p.text for p in expected]
