"""K samples, one prefill: `NumericPredictor.predict` latency at K = 1 and K = 8 on the
bundled SmolLM2-135M, against predict as it was before (the greedy pass, then the prompt
repeated K times and each copy generated from scratch), interleaved in one process.

    .venv/bin/python -m bench.sample_prefill [--rounds 8] [--threads 1] [--max-new-tokens 8]
        [--model bundled:smollm2-135m]

Each round runs the four (way, K) calls in a rotated order with one seed shared by both
ways, so they draw the same samples and decode equally long; each call records its
seconds and the 1-minute load average (the machine is shared). The goal: K = 8 within 2×
K = 1. Writes bench/results/sample_prefill.json and .png.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from jobs.infer import NumericPredictor
from jobs.infer.decoding import answer_line
from jobs.infer.generation import generate
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import ModelSpec

log = logging.getLogger("sample_prefill")
RESULTS = Path(__file__).resolve().parent / "results"
MODEL = "bundled:smollm2-135m"
PROMPT = "What is 317 + 24?"
KS = (1, 8)


def one_prefill(p: NumericPredictor, k: int, new: int, seed: int) -> list[float | None]:
    [out] = p.predict([PROMPT], max_new_tokens=new, samples=k, seed=seed)
    return [out.expected_value]


def before(p: NumericPredictor, k: int, new: int, seed: int) -> list[float | None]:
    """predict() before the shared prefill: two generations, each running its prompts."""
    batch = p._batch([PROMPT], chat=True)  # [1, T]
    generate(p.model, p.tokenizer, batch, max_new_tokens=new, temperature=0.0)
    repeated = {name: v.repeat_interleave(k, dim=0) for name, v in batch.items()}  # [K, T]
    drawn = generate(p.model, p.tokenizer, repeated, max_new_tokens=new, temperature=1.0, seed=seed)
    values = [p.parse(answer_line(p.tokenizer, ids)[0]) for ids, _ in p._split(drawn)]
    numbers = [v for v in values if v is not None]
    return [statistics.fmean(numbers) if numbers else None]


WAYS: dict[str, Callable[[NumericPredictor, int, int, int], list[float | None]]] = {
    "one prefill": one_prefill,
    "K prefills (before)": before,
}


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    model, tok = load_model_and_tokenizer(ModelSpec(source=args.model))
    p = NumericPredictor(model, tok)
    calls = [(way, k) for way in WAYS for k in KS]
    for way, k in calls:  # warm-up: first-call allocations and lazy initialisation
        WAYS[way](p, k, args.max_new_tokens, 0)
    rows: list[dict[str, Any]] = []
    for r in range(args.rounds):
        for way, k in calls[r % len(calls) :] + calls[: r % len(calls)]:
            start = time.perf_counter()
            estimate = WAYS[way](p, k, args.max_new_tokens, r)
            seconds = time.perf_counter() - start
            load = round(os.getloadavg()[0], 2)
            rows.append({"round": r, "way": way, "K": k, "seconds": round(seconds, 3),
                         "load_1m": load, "estimate": estimate[0]})  # fmt: skip
            log.info("%s", rows[-1])
    median = {
        f"{way} K={k}": statistics.median(
            r["seconds"] for r in rows if (r["way"], r["K"]) == (way, k)
        )
        for way, k in calls
    }
    loads = [r["load_1m"] for r in rows]
    # Per (round, K), the two ways' estimates: equal when they drew the same samples.
    pairs: dict[tuple[int, int], list[float | None]] = {}
    for row in rows:
        pairs.setdefault((row["round"], row["K"]), []).append(row["estimate"])
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared with other work)",
        "model": f"{args.model} (fp32), {args.threads} torch thread(s)",
        "request": {"prompt": PROMPT, "max_new_tokens": args.max_new_tokens, "rounds": args.rounds},
        "load_1m": {"min": min(loads), "max": max(loads)},
        "median_s": {name: round(s, 3) for name, s in median.items()},
        "k8_over_k1": {way: round(median[f"{way} K=8"] / median[f"{way} K=1"], 2) for way in WAYS},
        "same_estimate": f"{sum(a == b for a, b in pairs.values())} of {len(pairs)} (round, K)",
        "rows": rows,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (way, color) in enumerate(zip(WAYS, ("tab:blue", "tab:orange"), strict=True)):
        xs = [j + (i - 0.5) * 0.35 for j in range(len(KS))]
        med = [result["median_s"][f"{way} K={k}"] for k in KS]
        ax.bar(xs, med, width=0.35, color=color,
               label=f"{way}: K=8 is {result['k8_over_k1'][way]}× K=1")  # fmt: skip
        for x, k in zip(xs, KS, strict=True):
            times = [r["seconds"] for r in result["rows"] if (r["way"], r["K"]) == (way, k)]
            ax.plot([x] * len(times), times, "k.", markersize=3)
    ax.set_xticks(range(len(KS)), [f"K = {k}" for k in KS])
    ax.set_ylabel("predict latency (s): median bar, each call a dot")
    load = result["load_1m"]
    ax.set_title(
        f"{result['model']}: predict, 1 prompt, {result['request']['max_new_tokens']} new tokens\n"
        f"interleaved in one process; load average {load['min']}–{load['max']} on 2 cores",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def cli(doc: str, name: str, run: Callable[..., Any], plot: Callable[..., None]) -> Any:
    """The options these in-process predict benches share; runs `run` and writes
    --out/NAME.json and NAME.png (bench/sample_one_pass.py uses it too)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (cores are shared)")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out / f"{name}.png")
    return result


def main() -> None:
    result = cli(__doc__, "sample_prefill", run, plot)
    log.info("median seconds %s; K=8 over K=1 %s", result["median_s"], result["k8_over_k1"])


if __name__ == "__main__":
    main()
