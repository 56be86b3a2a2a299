"""Issue 30 item 7 (M4): one owner's many in-budget requests do not make another owner's
small request wait for all of them: merged calls stay within one request's budget, and a
request of a later batch reaches the turns while the earlier batch's calls still wait.
Real tiny model and the replica's run_groups and FairTurns (bench/serving_fairness.py
measures the same at the issue's sizes); no Ray."""

from __future__ import annotations

import asyncio

import pytest
from ray.serve import batching

from service.serving.api import Work
from service.serving.limits import merged
from tests.support.bench import load
from tests.support.fairness import check_one_call_wait, eight_heavy_then_one_small


def test_merged_calls_stay_within_one_requests_budget() -> None:
    works = [Work("predict", "m:1", ["1?"], {}, "ann", cost=6000) for _ in range(8)]
    works.append(Work("predict", "m:1", ["2?"], {}, "bob", cost=10))
    calls = merged(works, 16_384)
    assert [len(c) for c in calls] == [2, 2, 2, 2, 1]  # ann's 8 in four turns, bob's alone
    assert max(sum(works[i].cost for i in c) for c in calls) <= 16_384


def test_a_small_request_waits_for_one_call_not_the_whole_batch() -> None:
    # Each of ann's requests costs 9 rows × (prompt + 4) positions, over half the budget of
    # 200: each is a call of its own.
    bench = load("serving_fairness")
    predictor = bench.tiny_predictor()
    result = asyncio.run(
        bench.bob_wait(predictor, after=True, heavy=4, samples=8, new=4, budget=200)
    )
    assert result["ann_calls"] == 4
    assert result["bob_wait_s"] < result["ann_total_s"] / 2, result


# ---- issue 45 item 3 (M4): across batches, through the replica's own serve.batch -------------


def test_eight_heavy_requests_of_one_owner_delay_another_by_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """tests/support/fairness.py's scenario on generate()'s tiny model: bob's answer takes
    what it takes alone plus at most about one of ann's calls (the one in progress), not the
    5 that serve.batch's 4 slots made him wait behind before."""
    # Outside a replica serve.batch cannot read max_ongoing_requests for its warning.
    monkeypatch.setattr(
        batching._BatchQueue, "_warn_if_max_batch_size_exceeds_max_ongoing_requests", lambda _: None
    )
    check_one_call_wait(eight_heavy_then_one_small(load("serving_fairness").tiny_predictor()))
