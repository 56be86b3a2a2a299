"""Serving load: requests/s and p50/p99 latency of `/v1/predict` by concurrency, with Serve's
dynamic batching on and off (real Ray Serve over HTTP on 127.0.0.1), per workload: a model
and K, the sampled completions per prompt (K = 0: the greedy answer alone).

    .venv/bin/python bench/serve_load.py [--requests 64] [--max-new-tokens 8]
        [--workloads tiny:0,tiny:8,smollm2:0] [--levels 1,4,16] [--batching on,off]
        [--rounds 4] [--name serve_load]

`tiny` is a tiny random Llama with the SmolLM2 digit tokenizer whose weights are steered
(bench/serve_setup.py's `digit_writer`) so every completion is exactly `max_new_tokens`
digits: each request costs the same, and the sampled statistics are never empty.
`smollm2` is the bundled SmolLM2-135M-Instruct. Both are registered in a throw-away
NUMTUNE_HOME like trained ones. At each level the workloads take turns (`--rounds` slices
of `--requests` each), so a change in the machine's load falls on all of them alike; each
row records the range of the 1-minute load average over its level. The load generator
shares the 2 cores with Ray. Writes bench/results/NAME.json and .png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # serve_setup, also by file path
from serve_setup import SMOLLM2, TINY, free_port, new_token, register_checkpoint, smollm2

from service.settings import Settings

log = logging.getLogger("serve_load")
RESULTS = Path(__file__).resolve().parent / "results"


async def load_level(
    url: str, token: str, body: dict[str, Any], concurrency: int, requests: int
) -> tuple[list[float], float]:
    """`requests` POSTs by `concurrency` workers: each one's latency, and the seconds all took."""
    latencies: list[float] = []
    failures: list[str] = []
    remaining = [requests]
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=300, limits=limits, headers=headers) as client:

        async def worker() -> None:
            while remaining[0] > 0:
                remaining[0] -= 1
                start = time.perf_counter()
                reply = await client.post(f"{url}/v1/predict", json=body)
                latencies.append(time.perf_counter() - start)
                if reply.status_code != 200:
                    failures.append(f"{reply.status_code} {reply.text[:200]}")

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - began
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed, first: {failures[0]}")
    return latencies, seconds


def summary(latencies: list[float], seconds: float, concurrency: int) -> dict[str, Any]:
    """Throughput and latency percentiles of one level."""
    ms = np.asarray(latencies) * 1000
    return {
        "concurrency": concurrency,
        "requests": len(latencies),
        "seconds": round(seconds, 3),
        "rps": round(len(latencies) / seconds, 2),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    import ray
    from ray import serve

    from service.serving.api import ServeConfig
    from service.serving.deploy import APP_NAME, deploy

    home = Path(tempfile.mkdtemp(prefix="ntbench"))
    settings = Settings(home=home, dev=True)
    workloads = args.workloads
    builds = {"tiny": None, "smollm2": smollm2}
    refs = {
        m: register_checkpoint(settings, name=m, owner="bench", build=builds[m]).ref
        for m in dict.fromkeys(m for m, _ in workloads)
    }
    token = new_token(settings, "bench", ["read"])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    temp = tempfile.mkdtemp(prefix="ntb", dir="/tmp")
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp)
    rows = []
    try:
        for batching in args.batching:
            config = ServeConfig(
                batching=batching, max_batch_size=args.batch_size, batch_wait_s=args.batch_wait_s
            )
            deploy(settings, port=port, config=config)
            bodies = {
                (model, samples): {
                    "model": refs[model],
                    "prompts": ["What is 317 + 24?"],
                    "samples": samples,
                    "max_new_tokens": args.max_new_tokens,
                    "decoding": "greedy",
                }
                for model, samples in workloads
            }
            for body in bodies.values():
                asyncio.run(load_level(url, token, body, 2, 4))  # load the model, warm up
            for concurrency in args.levels:
                # The workloads take turns in `rounds` slices of the requests, so the shared
                # machine's load changes fall on all of them alike.
                took: dict[tuple[str, int], list[float]] = {w: [] for w in workloads}
                spent = dict.fromkeys(workloads, 0.0)
                loads = []
                per_turn = args.requests // args.rounds
                for _ in range(args.rounds):
                    for w, body in bodies.items():
                        latencies, seconds = asyncio.run(
                            load_level(url, token, body, concurrency, per_turn)
                        )
                        took[w] += latencies
                        spent[w] += seconds
                        loads.append(round(os.getloadavg()[0], 2))  # 1-minute, all users
                for (model, samples), latencies in took.items():
                    row = summary(latencies, spent[model, samples], concurrency)
                    rows.append({"model": model, "samples": samples, "batching": batching,
                                 **row, "load_1m": [min(loads), max(loads)]})  # fmt: skip
                    log.info("%s K=%d batching=%s %s", model, samples, batching, row)
            serve.delete(APP_NAME)
    finally:
        serve.shutdown()
        ray.shutdown()
    by = {(r["model"], r["samples"], r["batching"], r["concurrency"]): r for r in rows}
    both = set(args.batching) == {True, False}
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared with other work)",
        "models": {
            "tiny": f"{TINY} digit writer (random 2-layer Llama, hidden 64, 49,152 vocab)",
            "smollm2": f"{SMOLLM2} (SmolLM2-135M-Instruct, fp32)",
        },
        "request": {"prompts": 1, "max_new_tokens": args.max_new_tokens, "decoding": "greedy"},
        "max_batch_size": args.batch_size,
        "batch_wait_s": args.batch_wait_s,
        "replicas": 1,
        "rows": rows,
        # batching on / off throughput, per K and concurrency
        "speedup": {
            f"{m} K={k}": {
                str(c): round(by[m, k, True, c]["rps"] / by[m, k, False, c]["rps"], 2)
                for c in args.levels
            }
            for m, k in workloads
            if both
        },
        # p50 latency of K samples over that of K = 1, same model, batching and concurrency
        "p50_vs_k1": {
            f"{m} K={k} batching={b}": {
                str(c): round(by[m, k, b, c]["p50_ms"] / by[m, 1, b, c]["p50_ms"], 2)
                for c in args.levels
            }
            for m, k in workloads
            for b in args.batching
            if k > 1 and (m, 1) in workloads
        },
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys((r["model"], r["samples"]) for r in result["rows"]))
    fig, axes = plt.subplots(len(workloads), 2, figsize=(10, 4 * len(workloads)), squeeze=False)
    for (left, right), (model, samples) in zip(axes, workloads, strict=True):
        for batching, color in ((True, "tab:blue"), (False, "tab:orange")):
            rows = [
                r
                for r in result["rows"]
                if (r["model"], r["samples"], r["batching"]) == (model, samples, batching)
            ]
            label = "batching on" if batching else "batching off"
            xs = [r["concurrency"] for r in rows]
            left.plot(xs, [r["rps"] for r in rows], "o-", color=color, label=label)
            right.plot(xs, [r["p50_ms"] for r in rows], "o-", color=color, label=f"{label}, p50")
            right.plot(xs, [r["p99_ms"] for r in rows], "s--", color=color, label=f"{label}, p99")
        speed = result["speedup"].get(f"{model} K={samples}", {})
        gains = ", ×".join(f"{v} at {c}" for c, v in speed.items())
        left.set_title(f"{model}, K={samples}" + (f": batching ×{gains}" if speed else ""))
        left.set_ylabel("requests / s")
        right.set_ylabel("latency (ms)")
        right.set_yscale("log")
        for ax in (left, right):
            ax.set_xscale("log", base=2)
            levels = sorted({r["concurrency"] for r in result["rows"]})
            ax.set_xticks(levels, [str(c) for c in levels])
            ax.set_xlabel("concurrent clients")
            ax.legend(fontsize=8)
    fig.suptitle("/v1/predict on Ray Serve, 1 replica, 1 prompt per request")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def workloads(text: str) -> list[tuple[str, int]]:
    """ "tiny:0,smollm2:8" → [("tiny", 0), ("smollm2", 8)]."""
    return [(model, int(k)) for model, k in (item.split(":") for item in text.split(","))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=64, help="requests per level")
    parser.add_argument("--rounds", type=int, default=4, help="turns the workloads take per level")
    parser.add_argument(
        "--workloads", type=workloads,
        default="tiny:0,tiny:8,smollm2:0", help="MODEL:K,... (tiny|smollm2, K samples per prompt)",
    )  # fmt: skip
    parser.add_argument("--levels", type=lambda s: [int(c) for c in s.split(",")], default="1,4,16")
    parser.add_argument(
        "--batching", type=lambda s: [{"on": True, "off": False}[b] for b in s.split(",")],
        default="on,off",
    )  # fmt: skip
    parser.add_argument("--name", default="serve_load", help="results file name (no suffix)")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--batch-wait-s", type=float, default=0.01)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out / f"{args.name}.png")
    for row in result["rows"]:
        log.info("%s", row)
    log.info("speed-up from batching: %s; p50 vs K=1: %s", result["speedup"], result["p50_vs_k1"])


if __name__ == "__main__":
    main()
