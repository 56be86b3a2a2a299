"""How long a small request waits behind a heavy owner at one serving replica (issue 30
item 7): ann sends HEAVY in-budget predicts (1 prompt, SAMPLES samples, NEW new tokens
each); once her first model call runs, bob sends one greedy predict. Same real model, same
replica logic (service/serving/limits.py: run_groups and FairTurns), no Ray.

    .venv/bin/python -m bench.serving_fairness            # both modes, JSON to stdout

`before`: what the replica did: ann's requests merged into one model call (one batch),
and bob's request in the next batch, which serve.batch starts when the first has ended.
`after`: merged calls are at most one request's budget, batches run concurrently and each
waiting call has a thread of its own, so bob is queued at the turns at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jobs.infer import NumericPredictor
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import ModelSpec
from service.serving.api import ServeConfig, Work
from service.serving.limits import FairTurns, check_budget, run_groups


def tiny_predictor() -> NumericPredictor:
    model, tokenizer = load_model_and_tokenizer(ModelSpec(source="random:tiny-digit"))
    return NumericPredictor(model, tokenizer, use_chat_template=False)


def predict_work(
    predictor: NumericPredictor, owner: str, samples: int, new: int, budget: int
) -> Work:
    prompts = ["What is 12 + 30?"]
    lengths = predictor.prompt_tokens(prompts, chat=True)
    config = ServeConfig(max_request_tokens=budget)
    cost = check_budget(config, lengths, rows_per_prompt=1 + samples, max_new_tokens=new,
                        field="prompts")  # fmt: skip
    options = {"decoding": "greedy", "samples": samples, "max_new_tokens": new, "seed": None}
    return Work("predict", "m:1", prompts, options, owner, cost=cost)


async def bob_wait(
    predictor: NumericPredictor,
    *,
    after: bool,
    heavy: int,
    samples: int,
    new: int,
    budget: int = ServeConfig().max_request_tokens,
) -> dict[str, Any]:
    """Seconds bob's request took from arrival to answer, and ann's model calls."""
    turns, calls, started = FairTurns(), [], asyncio.Event()
    loop = asyncio.get_running_loop()

    def call(work: Work, p: NumericPredictor, prompts: list[str]) -> list[Any]:
        with turns.turn(work.owner):
            if work.owner == "ann":
                calls.append(len(prompts))
                loop.call_soon_threadsafe(started.set)
            return work.call(p, prompts)

    async def load(_ref: str) -> NumericPredictor:
        return predictor

    ann = [predict_work(predictor, "ann", samples, new, budget) for _ in range(heavy)]
    bob = [predict_work(predictor, "bob", 0, 4, budget)]
    # Before: one call for all of ann's requests (no cap on a merged call).
    cap = budget if after else sys.maxsize
    pool = ThreadPoolExecutor(2 * heavy + 2) if after else None
    began = time.monotonic()
    heavy_batch = asyncio.create_task(run_groups(ann, load, call, (), cap, pool))
    await started.wait()
    asked = time.monotonic()
    if not after:
        await heavy_batch  # serve.batch ran one batch at a time: bob's batch came next
    await run_groups(bob, load, call, (), cap, pool)
    waited = time.monotonic() - asked
    await heavy_batch
    return {"mode": "after" if after else "before", "bob_wait_s": round(waited, 3),
            "ann_total_s": round(time.monotonic() - began, 3), "ann_calls": len(calls)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heavy", type=int, default=8)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--new", type=int, default=32)
    args = parser.parse_args()
    predictor = tiny_predictor()
    out = [
        asyncio.run(bob_wait(predictor, after=after, heavy=args.heavy, samples=args.samples,
                             new=args.new))
        for after in (False, True)
    ]  # fmt: skip
    json.dump({"heavy": args.heavy, "samples": args.samples, "new": args.new, "runs": out},
              sys.stdout, indent=2)  # fmt: skip
    print()


if __name__ == "__main__":
    main()
