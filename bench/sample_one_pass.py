"""Greedy answer and K samples in one decoding pass: `NumericPredictor.predict` latency at
K = 0, 1 and 16 for one request, and for 16 requests with K = 8 (the one call a serving
replica makes when 16 requests arrive together: its batcher merges them), against predict as
it was before (a greedy pass, then a pass of the K sampled rows drawn by transformers'
sampling, both from one shared prompt prefill), interleaved in one process.

    .venv/bin/python -m bench.sample_one_pass [--rounds 8] [--threads 1] [--max-new-tokens 8]
        [--model bundled:smollm2-135m] [--out bench/results]

The model is held in the serving dtype (bf16 where the CPU computes it natively), as a
replica holds it. Each round runs every (way, prompts, K) call in a rotated order (the JSON
counts the calls whose greedy answers were equal both ways); each call records its seconds and the
1-minute load average (the machine is shared, and the JSON says with what). The issue's
goal: K = 16 within 1.5× K = 1. Writes bench/results/sample_one_pass.json and .png.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import GenerationConfig

from bench.sample_prefill import cli
from jobs.infer import NumericPredictor, Prediction
from jobs.infer.decoding import seeded
from jobs.infer.generation import expanded, prefill
from jobs.modeling.model import load_model_and_tokenizer
from jobs.modeling.precision import serving_dtype
from jobs.spec import ModelSpec

log = logging.getLogger("sample_one_pass")
MODEL = "bundled:smollm2-135m"
PROMPT = "What is 317 + 24?"
CELLS = [(1, 0), (1, 1), (1, 16), (16, 8)]  # (prompts in the call, K samples per prompt)
SHARED = "a protocol-2 study (one SmolLM2 fine-tune at a time) ran beside this on the 2 cores"


def one_pass(p: NumericPredictor, prompts: list[str], k: int, new: int, seed: int) -> Any:
    return p.predict(prompts, max_new_tokens=new, samples=k, seed=seed)


def hf_sampled(p: NumericPredictor, batch: dict[str, Any], cache: Any, new: int, seed: int) -> Any:
    """The sampled rows as generate() drew them before: transformers' own sampling
    (torch.multinomial over the vocabulary each step), temperature 1, no top-k."""
    config = GenerationConfig(
        max_new_tokens=new, do_sample=True, temperature=1.0, top_k=0,
        eos_token_id=p.tokenizer.eos_token_id, pad_token_id=p.tokenizer.pad_token_id,
    )  # fmt: skip
    with torch.no_grad(), seeded(seed, p.device):
        out = p.model.generate(**batch, generation_config=config, past_key_values=cache)
    return out[:, batch["input_ids"].shape[1] :]


def two_passes(p: NumericPredictor, prompts: list[str], k: int, new: int, seed: int) -> Any:
    """predict() before this change: the greedy rows' pass, then the sampled rows' pass
    (sampled by transformers), both from the one shared prefill."""
    batch = p._batch(prompts, chat=True)  # [B, T]
    cache = prefill(p.model, batch)
    greedy = p._generate(
        batch, max_new_tokens=new, temperature=0.0, processors=p.greedy, cache=expanded(cache, 1)
    )
    if k:
        repeated = {name: v.repeat_interleave(k, dim=0) for name, v in batch.items()}  # [B·K, T]
        drawn = hf_sampled(p, repeated, expanded(cache, k), new, seed)
        p._parsed(p._split(drawn), len(prompts), k)
    return [p.tokenizer.decode(ids, skip_special_tokens=True) for ids, _ in p._split(greedy)]


def comparable(out: Any) -> list[str]:
    """What both ways must agree on: each prompt's greedy answer line. (Their samples come
    from different random streams: numtune's sampler against transformers'.)"""
    if out and isinstance(out[0], str):
        return [text.strip().split("\n", 1)[0] for text in out]
    predictions: list[Prediction] = out
    return [pr.text for pr in predictions]


WAYS: dict[str, Callable[..., Any]] = {
    "one pass (after)": one_pass,
    "two passes (before)": two_passes,
}


def label(way: str, b: int, k: int) -> str:
    return f"{way} B={b} K={k}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    model: Any
    model, tok = load_model_and_tokenizer(ModelSpec(source=args.model))
    dtype = serving_dtype(torch.device("cpu"))
    model.to(dtype)  # as a replica holds it (service/serving/adapters.py)
    p = NumericPredictor(model, tok)
    calls = [(way, b, k) for b, k in CELLS for way in WAYS]
    for way, b, k in calls:  # warm-up: first-call allocations and lazy initialisation
        WAYS[way](p, [PROMPT] * b, k, args.max_new_tokens, 0)
    rows: list[dict[str, Any]] = []
    outputs: dict[tuple[Any, ...], Any] = {}
    for r in range(args.rounds):
        for way, b, k in calls[r % len(calls) :] + calls[: r % len(calls)]:
            start = time.perf_counter()
            out = WAYS[way](p, [PROMPT] * b, k, args.max_new_tokens, r)
            seconds = time.perf_counter() - start
            outputs[r, way, b, k] = comparable(out)
            rows.append({"round": r, "way": way, "prompts": b, "K": k, "seconds": round(seconds, 3),
                         "load_1m": round(os.getloadavg()[0], 2)})  # fmt: skip
            log.info("%s", rows[-1])
    median = {
        label(way, b, k): round(
            statistics.median(
                x["seconds"] for x in rows if (x["way"], x["prompts"], x["K"]) == (way, b, k)
            ),
            3,
        )
        for way, b, k in calls
    }
    loads = [x["load_1m"] for x in rows]
    after, before = WAYS
    # Calls whose greedy answers differ between the ways: in bf16 a row's
    # logits can round differently in a batch of another shape (17 rows against 1 and 16).
    differ = [
        {"round": r, "prompts": b, "K": k, "after": outputs[r, after, b, k],
         "before": outputs[r, before, b, k]}
        for r in range(args.rounds)
        for b, k in CELLS
        if outputs[r, after, b, k] != outputs[r, before, b, k]
    ]  # fmt: skip
    same = args.rounds * len(CELLS) - len(differ)
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, shared: {SHARED}",
        "model": f"{args.model} ({dtype}, the serving dtype), {args.threads} torch thread(s)",
        "request": {
            "prompt": PROMPT,
            "max_new_tokens": args.max_new_tokens,
            "rounds": args.rounds,
            "decoding": "greedy (number-first) + K samples at temperature 1",
        },
        "load_1m": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
        "median_s": median,
        "k16_over_k1": {
            way: round(median[label(way, 1, 16)] / median[label(way, 1, 1)], 2) for way in WAYS
        },
        "before_over_after": {
            f"B={b} K={k}": round(median[label(before, b, k)] / median[label(after, b, k)], 2)
            for b, k in CELLS
        },
        "same_greedy_answers": f"{same} of {args.rounds * len(CELLS)} (round, B, K)",
        "differ": differ,
        "rows": rows,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 1]})
    groups = [[c for c in CELLS if c[0] == 1], [c for c in CELLS if c[0] > 1]]
    for ax, cells in zip(axes, groups, strict=True):
        for i, (way, color) in enumerate(zip(WAYS, ("tab:blue", "tab:orange"), strict=True)):
            xs = [j + (i - 0.5) * 0.35 for j in range(len(cells))]
            med = [result["median_s"][label(way, b, k)] for b, k in cells]
            ax.bar(xs, med, width=0.35, color=color, label=way)
            for x, (b, k) in zip(xs, cells, strict=True):
                mine = [
                    r for r in result["rows"] if (r["way"], r["prompts"], r["K"]) == (way, b, k)
                ]
                times = [r["seconds"] for r in mine]
                ax.plot([x] * len(times), times, "k.", markersize=3)
        ax.set_xticks(range(len(cells)), [f"{b} request{'s' * (b > 1)}\nK = {k}" for b, k in cells])
        ax.set_ylabel("predict latency (s): median bar, each call a dot")
    ratio = result["k16_over_k1"]
    axes[0].set_title(
        "one request: K=16 / K=1 = "
        + ", ".join(f"{r}× {w.split(' (')[0]}" for w, r in ratio.items()),
        fontsize=9,
    )
    axes[1].set_title("16 requests at once (one merged call)", fontsize=9)
    axes[0].legend(fontsize=8)
    load, new = result["load_1m"], result["request"]["max_new_tokens"]
    where = f"load average {load['min']}–{load['max']} on 2 shared cores"
    fig.suptitle(f"{result['model']}, {new} new tokens; one process, {where}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    result = cli(__doc__, "sample_one_pass", run, plot)
    summary = ("load_1m", "median_s", "k16_over_k1", "before_over_after", "same_greedy_answers")
    log.info("%s", {k: result[k] for k in summary})


if __name__ == "__main__":
    main()
