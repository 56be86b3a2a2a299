"""Serving load: requests/s and p50/p99 latency of `/v1/predict` at concurrency 1, 4 and 16,
with Serve's dynamic batching on and off (real Ray Serve over HTTP on 127.0.0.1), for three
workloads: a tiny model's greedy answer alone (K=0) and with K sampled completions (the
expected value and interval), and the bundled SmolLM2-135M's greedy answer.

    .venv/bin/python bench/serve_load.py [--requests 64] [--samples 8] [--max-new-tokens 8]

The model is a tiny random Llama with the SmolLM2 digit tokenizer, registered in a
throw-away NUMTUNE_HOME like a trained one. Its weights are steered (`digit_writer`) so
every completion is exactly `max_new_tokens` digits: each request costs the same, and the
sampled statistics are never empty. The load generator shares the 2 cores with Ray.
Writes bench/results/serve_load.json and .png.

`digit_writer` and `register_checkpoint` are also what tests/integration/test_serving.py
uses to set up a registered version.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import torch

from jobs.checkpoint import SPEC_FILE, save_checkpoint
from jobs.losses.vocab import NumericVocab
from jobs.model import bundled_dir, load_model_and_tokenizer
from jobs.spec import JobSpec, ModelSpec
from service.registry import Registry, VersionInfo
from service.settings import Settings
from service.store import Database, JobStore, TokenStore, migrate

log = logging.getLogger("serve_load")
RESULTS = Path(__file__).resolve().parent / "results"
TINY = "random:tiny-digit"
SMOLLM2 = "bundled:smollm2-135m"
CHECKPOINT = "train/checkpoint_000000"
LEVELS = (1, 4, 16)


def digit_writer(out: Path, *, seed: int = 0) -> Path:
    """Save a tiny-digit checkpoint whose every next token is a digit (never end-of-text).

    Untied head; input embeddings get a large constant in feature 0, so the final hidden
    state's normalised feature 0 is ≈ +sqrt(64) whatever the text; the head's column 0 is
    +4 for the ten digit tokens and −4 elsewhere, so digits lead by ~60 logits. Which digit
    still depends on the random weights.
    """
    model, tok = load_model_and_tokenizer(ModelSpec(source=TINY), seed=seed)
    digits = NumericVocab.from_tokenizer(tok).token_ids
    inputs, output = model.get_input_embeddings(), model.get_output_embeddings()
    assert isinstance(inputs, torch.nn.Embedding) and isinstance(output, torch.nn.Linear)
    with torch.no_grad():
        model.config.tie_word_embeddings = False
        embed = inputs.weight  # [V, 64]
        head = torch.nn.Parameter(embed.detach().clone())  # [V, 64]
        output.weight = head
        embed[:, 0] = 4.0
        head[:, 0] = -4.0
        head[digits, 0] = 4.0
    spec = JobSpec.model_validate(
        {"name": "digits", "model": {"source": TINY, "use_chat_template": False},
         "data": {"task": "arithmetic"}}
    )  # fmt: skip
    save_checkpoint(out, model=model, tokenizer=tok, spec=spec, metrics={"step": 1})
    return out


def smollm2(out: Path) -> Path:
    """The bundled SmolLM2-135M-Instruct (safetensors, converted once) as a checkpoint."""
    shutil.copytree(bundled_dir(SMOLLM2.removeprefix("bundled:")), out)
    spec = JobSpec.model_validate({"name": "smollm2", "model": {"source": SMOLLM2}})
    (out / SPEC_FILE).write_text(spec.model_dump_json(indent=2))
    return out


def register_checkpoint(
    settings: Settings,
    *,
    name: str,
    owner: str,
    alias: str | None = None,
    seed: int = 0,
    build: Callable[[Path], Path] | None = None,
) -> VersionInfo:
    """A job row for `owner`, a checkpoint in its run folder (the digit writer unless
    `build` makes another), registered as the next version of `name` (and `alias`)."""
    db = Database(settings.database_url)
    migrate(db.engine)
    job, _ = JobStore(db).create(
        kind="job", name=name, owner=owner, spec={"name": name, "model": {"source": TINY}}
    )
    folder = Path(settings.storage_root) / "runs" / job.id / CHECKPOINT
    if build is None:
        digit_writer(folder, seed=seed)
    else:
        build(folder)
    registry = Registry(db, settings.storage_root, settings.home / "cache")
    row = registry.register(name=name, owner=owner, job=job, checkpoint=CHECKPOINT)
    if alias is not None:
        registry.store.set_alias(name, alias, row.version)
    version = registry.resolve(f"{name}:{row.version}")
    db.dispose()
    return version


def new_token(settings: Settings, owner: str, scopes: list[str]) -> str:
    db = Database(settings.database_url)
    migrate(db.engine)
    secret = TokenStore(db).create(owner, scopes)[1]
    db.dispose()
    return secret


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def load_level(
    url: str, token: str, body: dict[str, Any], concurrency: int, requests: int
) -> dict[str, Any]:
    """`requests` POSTs by `concurrency` workers; throughput and latency percentiles."""
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
    ms = np.asarray(latencies) * 1000
    return {
        "concurrency": concurrency,
        "requests": requests,
        "seconds": round(seconds, 3),
        "rps": round(requests / seconds, 2),
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
    refs = {
        "tiny": register_checkpoint(settings, name="tiny", owner="bench").ref,
        "smollm2": register_checkpoint(settings, name="smollm2", owner="bench", build=smollm2).ref,
    }
    # (model, K): the tiny model's greedy answer alone and with K samples; SmolLM2's greedy.
    workloads = [("tiny", 0), ("tiny", args.samples), ("smollm2", 0)]
    token = new_token(settings, "bench", ["read"])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    temp = tempfile.mkdtemp(prefix="ntb", dir="/tmp")
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp)
    rows = []
    try:
        for batching in (True, False):
            config = ServeConfig(
                batching=batching, max_batch_size=args.batch_size, batch_wait_s=args.batch_wait_s
            )
            deploy(settings, port=port, config=config)
            for model, samples in workloads:
                body = {
                    "model": refs[model], "prompts": ["What is 317 + 24?"], "samples": samples,
                    "max_new_tokens": args.max_new_tokens, "decoding": "greedy",
                }  # fmt: skip
                asyncio.run(load_level(url, token, body, 2, 4))  # load the model, warm up
                for concurrency in LEVELS:
                    row = asyncio.run(load_level(url, token, body, concurrency, args.requests))
                    rows.append({"model": model, "samples": samples, "batching": batching, **row})
                    log.info("%s K=%d batching=%s %s", model, samples, batching, row)
            serve.delete(APP_NAME)
    finally:
        serve.shutdown()
        ray.shutdown()
    rps = {(r["model"], r["samples"], r["batching"], r["concurrency"]): r["rps"] for r in rows}
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
                str(c): round(rps[(m, k, True, c)] / rps[(m, k, False, c)], 2) for c in LEVELS
            }
            for m, k in workloads
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
        speed = result["speedup"][f"{model} K={samples}"]
        left.set_title(
            f"{model}, K={samples}: batching ×"
            + ", ×".join(f"{v} at {c}" for c, v in speed.items())
        )
        left.set_ylabel("requests / s")
        right.set_ylabel("latency (ms)")
        right.set_yscale("log")
        for ax in (left, right):
            ax.set_xscale("log", base=2)
            ax.set_xticks(list(LEVELS), [str(c) for c in LEVELS])
            ax.set_xlabel("concurrent clients")
            ax.legend(fontsize=8)
    fig.suptitle("/v1/predict on Ray Serve, 1 replica, 1 prompt per request")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=64, help="requests per level")
    parser.add_argument("--samples", type=int, default=8, help="K samples per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--batch-wait-s", type=float, default=0.01)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "serve_load.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out / "serve_load.png")
    for row in result["rows"]:
        log.info("%s", row)
    log.info("speed-up from batching: %s", result["speedup"])


if __name__ == "__main__":
    main()
