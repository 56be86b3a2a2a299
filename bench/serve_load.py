"""Serving load: requests/s and p50/p99 latency of `/v1/predict` by concurrency, with Serve's
dynamic batching on and off (real Ray Serve over HTTP on 127.0.0.1), per workload: a model
and K, the sampled completions per prompt (K = 0: the greedy answer alone).

    .venv/bin/python -m bench.serve_load [--requests 64] [--max-new-tokens 8]
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

from bench.serve_engines import EngineProcess
from jobs.modeling.folders import bundled_dir
from service.settings import Settings
from tests.support.serving import SMOLLM2, TINY, free_port, new_token, register_checkpoint, smollm2

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
    folder = str(bundled_dir(SMOLLM2.removeprefix("bundled:")))
    pythons = {"hf": sys.executable, "vllm": str(args.vllm_python)}
    bare = {e: EngineProcess(e, pythons[e], folder, args.max_new_tokens) for e in args.engines}
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp)
    rows = []
    try:
        phases = [(b, d, e) for b in args.batching for d in args.dtypes for e in args.serve_engines]
        for batching, dtype, decoder in phases:
            config = ServeConfig(
                batching=batching, max_batch_size=args.batch_size,
                batch_wait_s=args.batch_wait_s, dtype=dtype, engine=decoder,
            )  # fmt: skip
            served = f"numtune[{dtype}]" if decoder == "hf" else f"numtune+{decoder}[{dtype}]"
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
                turns = [(served, w) for w in workloads]
                turns += [(e, w) for w in workloads for e in bare if w[0] == "smollm2"]
                took: dict[tuple[str, tuple[str, int]], list[float]] = {t: [] for t in turns}
                spent = dict.fromkeys(turns, 0.0)
                loads = []
                per_turn = args.requests // args.rounds
                for _ in range(args.rounds):
                    for engine, w in turns:
                        if engine in bare:
                            latencies, seconds = bare[engine].level(concurrency, w[1], per_turn)
                        else:
                            latencies, seconds = asyncio.run(
                                load_level(url, token, bodies[w], concurrency, per_turn)
                            )
                        took[engine, w] += latencies
                        spent[engine, w] += seconds
                        loads.append(round(os.getloadavg()[0], 2))  # 1-minute, all users
                for (engine, (model, samples)), latencies in took.items():
                    row = summary(latencies, spent[engine, (model, samples)], concurrency)
                    rows.append({"engine": engine, "model": model, "samples": samples,
                                 "batching": batching, "phase": f"{batching}/{dtype}/{decoder}",
                                 **row,
                                 "load_1m": [min(loads), max(loads)]})  # fmt: skip
                    log.info("%s %s K=%d batching=%s %s", engine, model, samples, batching, row)
            serve.delete(APP_NAME)
    finally:
        for process in bare.values():
            process.close()
        serve.shutdown()
        ray.shutdown()
    return report(args, bare, rows)


def report(
    args: argparse.Namespace, bare: dict[str, EngineProcess], rows: list[dict[str, Any]]
) -> dict[str, Any]:
    """The measured rows with what they were measured on: machine, models, engines, threads."""
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared with other work)",
        "models": {
            "tiny": f"{TINY} digit writer (random 2-layer Llama, hidden 64, 49,152 vocab)",
            "smollm2": f"{SMOLLM2} (SmolLM2-135M-Instruct)",
        },
        "engines": {
            "numtune[DTYPE]": "numtune's /v1/predict over HTTP (Ray Serve), numeric read-out on,"
            " models served in DTYPE (auto: bf16 where the CPU has it natively)",
            "numtune+vllm[DTYPE]": "the same, the replica decoding on vLLM"
            " (NUMTUNE_SERVE_ENGINE=vllm: a vLLM worker beside the replica, in DTYPE)",
            **{
                e: f"bare {e} engine, {p.info['dtype']}, in-process batches of C prompts"
                for e, p in bare.items()
            },
        },
        "request": {
            "prompts": 1,
            "max_new_tokens": args.max_new_tokens,
            "decoding": "greedy",
            "samples": "K sampled completions besides the greedy answer",
        },
        "beside": args.beside,  # what else ran on the machine meanwhile (load_1m per row)
        "threads": {
            "numtune": "one replica of replica_cpus = 1 (Ray sets OMP_NUM_THREADS = 1)",
            "vllm": "vLLM's CPU defaults: compute bound to one core, the other for its front end",
            "hf": f"{os.cpu_count()} torch threads",
        },
        "max_batch_size": args.batch_size,
        "batch_wait_s": args.batch_wait_s,
        "replicas": 1,
        "rows": rows,
        **ratios(rows),
    }


def ratios(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Throughput over the bare vLLM engine's measured in the same phase, and p50 latency of
    K samples over K = 1, per engine, workload and concurrency."""
    by = {(r["engine"], r["model"], r["samples"], r["batching"], r["phase"], r["concurrency"]): r
          for r in rows}  # fmt: skip
    vs_vllm: dict[str, float] = {}
    vs_k1: dict[str, float] = {}
    for (engine, model, k, batching, phase, c), row in by.items():
        where = f"{engine} {model} K={k} batching={batching} c={c}"
        vllm = by.get(("vllm", model, k, batching, phase, c))
        if vllm is not None and engine != "vllm":
            vs_vllm[where] = round(row["rps"] / vllm["rps"], 3)
        one = by.get((engine, model, 1, batching, phase, c))
        if one is not None and k > 1:
            vs_k1[where] = round(row["p50_ms"] / one["p50_ms"], 2)
    return {"rps_vs_vllm": vs_vllm, "p50_vs_k1": vs_k1}


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    workloads = list(dict.fromkeys((r["model"], r["samples"]) for r in rows))
    fig, axes = plt.subplots(len(workloads), 2, figsize=(11, 4 * len(workloads)), squeeze=False)
    series = list(dict.fromkeys((r["engine"], r["batching"], r["phase"]) for r in rows))
    phases = {r["phase"] for r in rows}
    for (left, right), (model, samples) in zip(axes, workloads, strict=True):
        for engine, batching, phase in series:
            mine = [
                r for r in rows
                if (r["model"], r["samples"], r["engine"], r["batching"], r["phase"])
                == (model, samples, engine, batching, phase)
            ]  # fmt: skip
            if not mine:
                continue
            label = engine + ("" if batching else " (batching off)")
            label += f" [{phase}]" if len(phases) > 1 and not engine.startswith("numtune") else ""
            xs = [r["concurrency"] for r in mine]
            line = left.plot(xs, [r["rps"] for r in mine], "o-", label=label)[0]
            right.plot(xs, [r["p50_ms"] for r in mine], "o-", color=line.get_color(), label=label)
        left.set_title(f"{model}, K={samples}: requests / s")
        right.set_title(f"{model}, K={samples}: p50 latency (ms)")
        right.set_yscale("log")
        for ax in (left, right):
            ax.set_xscale("log", base=2)
            levels = sorted({r["concurrency"] for r in rows})
            ax.set_xticks(levels, [str(c) for c in levels])
            ax.set_xlabel("concurrent clients")
            ax.legend(fontsize=7)
    fig.suptitle("numtune /v1/predict (Ray Serve, 1 replica) beside bare engines, same weights")
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
    parser.add_argument(
        "--engines", type=lambda s: [e for e in s.split(",") if e and e != "numtune"],
        default="numtune", help="numtune plus bare engines beside it: hf, vllm (smollm2 only)",
    )  # fmt: skip
    parser.add_argument(
        "--dtypes", type=lambda s: s.split(","), default="auto",
        help="numtune's serving dtypes, one deploy each (auto,fp32,bf16)",
    )  # fmt: skip
    parser.add_argument(
        "--serve-engines", type=lambda s: s.split(","), default="hf",
        help="what numtune's replica decodes on, one deploy each (hf,vllm)",
    )  # fmt: skip
    parser.add_argument("--vllm-python", type=Path, default=Path(".venv-vllm/bin/python"))
    parser.add_argument("--beside", default="", help="what else runs on the machine (recorded)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out / f"{args.name}.png")
    for row in result["rows"]:
        log.info("%s", row)
    log.info("vs vLLM: %s; p50 vs K=1: %s", result["rps_vs_vllm"], result["p50_vs_k1"])


if __name__ == "__main__":
    main()
