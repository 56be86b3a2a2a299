"""Issue 14 items 5 and 7, the serving logic that needs no Ray: the per-request budget and
prompt cap, the time limit, owners' turns at the compute, seeds in range, and one bad
request in a batch failing alone. Real tiny model; tests/integration/test_serving.py
sends the same requests to a real Ray Serve."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pydantic import ValidationError

from jobs.infer import NumericPredictor
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import ModelSpec
from service.errors import InvalidRequest
from service.serving.api import PredictRequest, ServeConfig, Work
from service.serving.limits import (
    FairTurns,
    RequestTimedOut,
    check_budget,
    run_groups,
    timed_call,
)


@pytest.fixture(scope="module")
def predictor() -> NumericPredictor:
    model, tokenizer = load_model_and_tokenizer(ModelSpec(source="random:tiny-digit"))
    return NumericPredictor(model, tokenizer, use_chat_template=False)


def test_the_issues_request_is_over_budget_and_names_it() -> None:
    body = PredictRequest(
        model="m:1", prompts=["What is 1 + 1?"] * 64, samples=256, max_new_tokens=512
    )
    with pytest.raises(InvalidRequest) as refused:
        check_budget(ServeConfig(), [8] * 64, rows_per_prompt=body.rows_per_prompt,
                     max_new_tokens=512, field="prompts")  # fmt: skip
    [problem] = refused.value.detail
    assert problem["field"] == "budget"
    assert "64 prompt(s) × 257 row(s)" in problem["message"]
    assert "NUMTUNE_SERVE_MAX_REQUEST_TOKENS" in problem["message"]
    # The measured 8 × 64 × 32 request (122 s on the tiny model) is refused too.
    with pytest.raises(InvalidRequest):
        check_budget(ServeConfig(), [8] * 8, rows_per_prompt=65, max_new_tokens=32, field="p")
    check_budget(ServeConfig(), [8] * 2, rows_per_prompt=17, max_new_tokens=16, field="p")


def test_a_long_prompt_is_refused_naming_it(predictor: NumericPredictor) -> None:
    config = ServeConfig(max_prompt_tokens=32)
    lengths = predictor.prompt_tokens(["1 + 1?", "9" * 100], chat=True)
    with pytest.raises(InvalidRequest) as refused:
        check_budget(config, lengths, rows_per_prompt=1, max_new_tokens=4, field="prompts")
    [problem] = refused.value.detail
    assert problem["field"] == "prompts[1]" and "limit is 32" in problem["message"]


def test_seeds_out_of_range_are_422() -> None:
    for seed in (2**64, -1):
        with pytest.raises(ValidationError, match="seed"):
            PredictRequest(model="m:1", prompts=["1?"], seed=seed)
    assert PredictRequest(model="m:1", prompts=["1?"], seed=2**63 - 1).seed == 2**63 - 1


def work(seed: int | None, owner: str = "ann") -> Work:
    options = {"max_new_tokens": 2, "temperature": 1.0, "seed": seed, "chat": False}
    return Work("complete", "m:1", ["1 + 1 ="], options, owner)


def test_one_bad_request_in_a_batch_fails_alone(predictor: NumericPredictor) -> None:
    async def load(_ref: str) -> NumericPredictor:
        return predictor

    def call(w: Work, p: NumericPredictor, prompts: list[str]) -> list[Any]:
        return w.call(p, prompts)

    # A seed torch cannot take (what the old API let through): torch raises in its group.
    works = [work(2**64, "mallory"), work(None), work(7, "bob")]
    results = asyncio.run(run_groups(works, load, call, (), ServeConfig().max_request_tokens))
    assert isinstance(results[0], ValueError) and "Overflow" in str(results[0])
    assert [len(r) for r in results[1:]] == [1, 1]  # type: ignore[arg-type]


def test_generation_past_the_time_limit_is_cut_and_refused(predictor: NumericPredictor) -> None:
    with pytest.raises(RequestTimedOut, match="NUMTUNE_SERVE_REQUEST_TIMEOUT_S"):
        timed_call(work(None), predictor, ["1 + 1 ="], 1e-9)
    assert predictor._deadline is None  # the limit ends with the call
    assert len(timed_call(work(None), predictor, ["1 + 1 ="], 3600.0)) == 1


def test_owners_take_turns() -> None:
    turns = FairTurns()
    order: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def first() -> None:
        with turns.turn("ann"):
            holding.set()
            release.wait()

    def queued(owner: str, tag: str) -> None:
        with turns.turn(owner):
            order.append(tag)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    holding.wait()
    # ann queues three calls before bob queues one: bob, who has had no turn, goes next
    # (ann's call in progress was hers), not fourth (issue 30 item 7).
    for owner, tag in (("ann", "a1"), ("ann", "a2"), ("ann", "a3"), ("bob", "b1")):
        t = threading.Thread(target=queued, args=(owner, tag))
        t.start()
        threads.append(t)
        while sum(turns.waiting().values()) < len(threads) - 1:
            threading.Event().wait(0.001)
    release.set()
    for t in threads:
        t.join()
    assert order == ["b1", "a1", "a2", "a3"]
