"""Turns between owners through a serving replica's own batching path (`_submit` →
serve.batch → run_groups → `_locked`: the turns and the time limit), on a bare instance of
the deployment class: the real methods, no Ray. One scenario, run on generate()
(tests/security/test_serving_fairness.py) and on vLLM (tests/integration/test_vllm_engine.py):
ann sends 8 in-budget heavy predicts a little apart (each its own batch, as separate HTTP
requests are); once her first call runs, bob sends a small greedy predict."""

from __future__ import annotations

import asyncio
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.serving_fairness import predict_work
from jobs.infer import NumericPredictor
from service.serving.api import ReplicaConfig, ServeConfig, Work
from service.serving.deployment import NumtuneServing
from service.serving.limits import FairTurns

Call = tuple[str, float, float]  # (owner, began, ended) of one model call


def _forget_batch_queue() -> None:
    """serve.batch keeps one queue per decorated method, made on first use and bound to
    that call's event loop: a replica process has one loop, each scenario here its own, so
    each starts with a new queue; and a queue left behind makes the class unpicklable, so a
    later `serve.run` of it in the same process fails."""
    cls = NumtuneServing.func_or_class  # type: ignore[attr-defined]  # a serve.Deployment
    cls._batched.set_max_batch_size.__self__._queue = None


class Replica:
    """The deployment's batching path on a bare instance serving `predictor` alone. Each
    model call is logged as (owner, began, ended); ann asks for samples, bob not."""

    def __init__(self, predictor: NumericPredictor, budget: int) -> None:
        cls = NumtuneServing.func_or_class  # type: ignore[attr-defined]  # a serve.Deployment
        _forget_batch_queue()
        self.replica = cls.__new__(cls)
        self.replica.config = ReplicaConfig(
            database_url="sqlite://", storage_root="/nonexistent", cache_dir="/nonexistent",
            token_cache_s=1.0, serve=ServeConfig(max_request_tokens=budget),
        )  # fmt: skip
        self.replica.turns = FairTurns()
        self.replica.waiting = ThreadPoolExecutor(64, "turn")
        self.calls: list[Call] = []
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


@dataclass(frozen=True)
class Turns:
    calls: list[Call]
    arrived: float  # when bob sent his request
    alone: float  # bob's answer alone (s)
    waited: float  # bob's answer behind ann's (s)


def eight_heavy_then_one_small(predictor: NumericPredictor) -> Turns:
    """The scenario (module docstring); `predictor.predict` is logged meanwhile, then
    restored."""
    heavy = predict_work(predictor, "ann", 16, 8, 1_000)
    replica = Replica(predictor, budget=heavy.cost)  # one heavy request: one call, in budget
    arrived: list[float] = []

    def small() -> Work:
        return predict_work(predictor, "bob", 0, 4, heavy.cost)

    async def scenario() -> tuple[float, float]:
        alone = min([await replica.ask(small()) for _ in range(3)])
        anns = []
        for _ in range(8):
            work = predict_work(predictor, "ann", 16, 8, 1_000)
            anns.append(asyncio.create_task(replica.ask(work)))
            # Past batch_wait_s (0.01 s): a batch of its own. Close enough that her calls
            # (~0.015-0.08 s each on generate()'s tiny model, by machine) cannot keep pace.
            await asyncio.sleep(0.02)
        while "ann" not in replica.running:
            await asyncio.sleep(0.005)
        arrived.append(time.monotonic())
        waited = await replica.ask(small())
        await asyncio.gather(*anns)
        return alone, waited

    try:
        alone, waited = asyncio.run(scenario())
    finally:
        del predictor.predict  # the instance's logger: the class's method again
        _forget_batch_queue()  # its loop holds weakrefs: the class would not pickle for Ray
    return Turns(replica.calls, arrived[0], alone, waited)


def check_one_call_wait(turns: Turns) -> None:
    """bob's answer took what it takes alone plus at most about one of ann's calls (the one
    in progress), not the 5 that serve.batch's 4 slots made him wait behind before."""
    ann = [(began, end) for owner, began, end in turns.calls if owner == "ann"]
    assert len(ann) == 8
    one_call = statistics.median(end - began for began, end in ann)
    bob_began = next(began for owner, began, _ in turns.calls[3:] if owner == "bob")
    # ann still had calls waiting when bob came (else nothing here tests turns) ...
    assert sum(began > bob_began for began, _ in ann) >= 2, turns.calls
    # ... and at most the call in progress when he came ran before his: none of hers began
    # between his arrival and his own call (one may, in the moment his work is enqueued).
    between = [began for began, _ in ann if turns.arrived <= began < bob_began]
    assert len(between) <= 1, (turns.arrived, turns.calls)
    assert turns.waited < turns.alone + 1.5 * one_call, (turns.alone, turns.waited, one_call)
