"""Issue 30 item 7 (M4): one owner's many in-budget requests do not make another owner's
small request wait for all of them: merged calls stay within one request's budget, and a
request of a later batch reaches the turns while the earlier batch's calls still wait.
Real tiny model and the replica's run_groups and FairTurns (bench/serving_fairness.py
measures the same at the issue's sizes); no Ray."""

from __future__ import annotations

import asyncio
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from ray.serve import batching

from jobs.infer import NumericPredictor
from service.serving.api import ReplicaConfig, ServeConfig, Work
from service.serving.deployment import NumtuneServing
from service.serving.limits import FairTurns, merged
from tests.support.bench import load


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


class Replica:
    """NumtuneServing's batching path (`_submit` → serve.batch → run_groups → `_locked`:
    the turns and the time limit), on a bare instance: the real methods, a tiny model, no
    Ray. Each model call is logged as (owner, began, ended); ann asks for samples, bob not."""

    def __init__(self, predictor: NumericPredictor, budget: int) -> None:
        cls = NumtuneServing.func_or_class  # type: ignore[attr-defined]  # a serve.Deployment
        self.replica = cls.__new__(cls)
        self.replica.config = ReplicaConfig(
            database_url="sqlite://", storage_root="/nonexistent", cache_dir="/nonexistent",
            token_cache_s=1.0, serve=ServeConfig(max_request_tokens=budget),
        )  # fmt: skip
        self.replica.turns = FairTurns()
        self.replica.waiting = ThreadPoolExecutor(64, "turn")
        self.calls: list[tuple[str, float, float]] = []
        self.running: list[str] = []  # owners of the calls begun so far
        predict = predictor.predict

        def logged(prompts: list[str], **options: Any) -> Any:
            began = time.monotonic()
            self.running.append("ann" if options["samples"] else "bob")
            out = predict(prompts, **options)
            self.calls.append(("ann" if options["samples"] else "bob", began, time.monotonic()))
            return out

        async def load(_ref: str) -> NumericPredictor:
            return predictor

        predictor.predict = logged  # type: ignore[method-assign]
        self.replica.load = load

    async def ask(self, work: Work) -> float:
        began = time.monotonic()
        await self.replica._submit(work)
        return time.monotonic() - began


def test_eight_heavy_requests_of_one_owner_delay_another_by_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ann sends 8 in-budget heavy predicts a little apart (each its own batch, as separate
    HTTP requests are); once her first call runs, bob sends a small greedy predict. bob's
    answer takes what it takes alone plus at most about one of ann's calls (the one in
    progress), not the 5 that serve.batch's 4 slots made him wait behind before."""
    # Outside a replica serve.batch cannot read max_ongoing_requests for its warning.
    monkeypatch.setattr(
        batching._BatchQueue, "_warn_if_max_batch_size_exceeds_max_ongoing_requests", lambda _: None
    )
    bench = load("serving_fairness")
    predictor = bench.tiny_predictor()
    heavy = bench.predict_work(predictor, "ann", 16, 8, 1_000)
    replica = Replica(predictor, budget=heavy.cost)  # one heavy request: one call, in budget

    async def scenario() -> tuple[float, float]:
        small = bench.predict_work(predictor, "bob", 0, 4, heavy.cost)
        alone = min([await replica.ask(small) for _ in range(3)])
        anns = []
        for _ in range(8):
            work = bench.predict_work(predictor, "ann", 16, 8, 1_000)
            anns.append(asyncio.create_task(replica.ask(work)))
            await asyncio.sleep(0.05)  # past batch_wait_s: a batch of its own
        while "ann" not in replica.running:
            await asyncio.sleep(0.005)
        arrived.append(time.monotonic())
        waited = await replica.ask(bench.predict_work(predictor, "bob", 0, 4, heavy.cost))
        await asyncio.gather(*anns)
        return alone, waited

    arrived: list[float] = []
    alone, waited = asyncio.run(scenario())
    ann = [(began, end) for owner, began, end in replica.calls if owner == "ann"]
    assert len(ann) == 8
    one_call = statistics.median(end - began for began, end in ann)
    bob_began = next(began for owner, began, _ in replica.calls[3:] if owner == "bob")
    # ann still had calls waiting when bob came (else nothing here tests turns) ...
    assert sum(began > bob_began for began, _ in ann) >= 2, replica.calls
    # ... and at most the call in progress when he came ran before his: none of hers began
    # between his arrival and his own call (one may, in the moment his work is enqueued).
    between = [began for began, _ in ann if arrived[0] <= began < bob_began]
    assert len(between) <= 1, (arrived, replica.calls)
    assert waited < alone + 1.5 * one_call, (alone, waited, one_call)
