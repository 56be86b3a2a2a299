"""numtune's predictor in float32 (before) and bfloat16 (after: NUMTUNE_SERVE_DTYPE=auto on a
CPU with native bf16) beside a bare batched HF `generate` of the same weights, in one process,
taking turns: the model call a serving replica makes for a batch of B requests, each one
greedy answer plus K samples of 8 tokens, without Ray or HTTP.

    .venv/bin/python -m bench.serve_dtype [--rounds 2] [--threads 1] [--name serve_load-inproc]

One thread by default: what a replica with replica_cpus = 1 gets (Ray sets OMP_NUM_THREADS).
Writes bench/results/NAME.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.serve_engines import QUESTION, HFEngine
from jobs.infer import NumericPredictor
from jobs.modeling.folders import bundled_dir
from jobs.modeling.model import load_checkpoint_model
from jobs.modeling.precision import serving_dtype

log = logging.getLogger("serve_dtype")
RESULTS = Path(__file__).resolve().parent / "results"
SHAPES = [(1, 0), (1, 1), (1, 16), (16, 0), (16, 1), (16, 16)]  # (B requests, K samples)


def predictor(folder: Path, dtype: torch.dtype) -> NumericPredictor:
    model: Any = load_checkpoint_model(folder)
    model.to(dtype)
    return NumericPredictor.from_checkpoint(folder, model=model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", default="serve_load-inproc")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    folder = bundled_dir("smollm2-135m")
    after = serving_dtype(torch.device("cpu"))
    before_p, after_p = predictor(folder, torch.float32), predictor(folder, after)
    hf = HFEngine(str(folder), 8)

    def numtune(p: NumericPredictor) -> Callable[[int, int], object]:
        return lambda b, k: p.predict([QUESTION] * b, max_new_tokens=8, samples=k)

    engines = {"numtune fp32": numtune(before_p), f"numtune {after}": numtune(after_p)}
    engines["hf generate " + str(hf.dtype)] = hf.run
    times: dict[tuple[str, int, int], list[float]] = {}
    loads = []
    for warm in engines.values():
        warm(1, 1)
    for _ in range(args.rounds):
        for b, k in SHAPES:
            for name, run in engines.items():
                start = time.perf_counter()
                run(b, k)
                times.setdefault((name, b, k), []).append(time.perf_counter() - start)
                loads.append(os.getloadavg()[0])
    rows = [
        {"engine": name, "requests": b, "samples": k, "seconds": round(min(ts), 3),
         "answers_per_s": round(b / min(ts), 2), "all_s": [round(t, 3) for t in ts]}
        for (name, b, k), ts in times.items()
    ]  # fmt: skip
    best: dict[tuple[str, int, int], float] = {k: min(ts) for k, ts in times.items()}
    result = {
        "what": __doc__.split("\n\n")[0],
        "threads": args.threads,
        "load_1m": [round(min(loads), 2), round(statistics.median(loads), 2), round(max(loads), 2)],
        "rows": rows,
        "speedup_bf16_over_fp32": {
            f"B={b} K={k}": round(best["numtune fp32", b, k] / best[f"numtune {after}", b, k], 2)
            for b, k in SHAPES
        },
        "k16_over_k1": {
            f"{name} B={b}": round(best[name, b, 16] / best[name, b, 1], 2)
            for name in engines
            for b in (1, 16)
        },
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    for row in rows:
        log.info("%s", row)
    log.info("%s", {k: result[k] for k in ("load_1m", "speedup_bf16_over_fp32", "k16_over_k1")})


if __name__ == "__main__":
    main()
