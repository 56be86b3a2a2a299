"""What scoring extra decodings costs a run's final evaluation (jobs/infer/all_decodings.py).

    nice -n 10 .venv/bin/python -m bench.decoding_cost [--model bundled:smollm2-135m]
        [--questions 32] [--samples 16] [--reps 2]

Times, in CPU seconds of this process (one torch thread, so a shared machine's load barely
moves them; the minimum over --reps interleaved repetitions), the primary evaluation
(train.eval_decoding number_first, jobs/infer/evaluate.py:generate_answers), the default
extra decodings (expected + median: one batched greedy pass sharing the prompts' prefill),
every greedy-type decoding in that one pass, and the K-sample decodings (sample_mean and
sample_median from one sampling pass), on held-out add_or_sub questions, 12 new tokens,
batches of 16. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import torch

from jobs.data import load_task
from jobs.infer.all_decodings import DecodeSettings, decode_all
from jobs.infer.evaluate import generate_answers
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import DataSpec, ModelSpec

TOKENS, BATCH = 12, 16
GREEDY = ["greedy", "number_first", "expected", "median"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="bundled:smollm2-135m")
    parser.add_argument("--questions", type=int, default=32)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tok = load_model_and_tokenizer(ModelSpec(source=args.model, use_chat_template=False))
    model.eval()
    held = load_task(DataSpec(eval_size=args.questions, train_size=100)).eval
    settings = DecodeSettings(TOKENS, BATCH, False, number_first=True, samples=args.samples)
    passes: dict[str, Callable[[], Any]] = {
        "primary number_first": lambda: generate_answers(
            model, tok, held, max_new_tokens=TOKENS, batch_size=BATCH, use_chat_template=False
        ),
        "expected+median": lambda: decode_all(
            model, tok, held, ["expected", "median"], settings, "arithmetic"
        ),
        "greedy+number_first+expected+median": lambda: decode_all(
            model,
            tok,
            held,
            ["greedy", "number_first", "expected", "median"],
            settings,
            "arithmetic",
        ),
        f"sample_mean+sample_median K={args.samples}": lambda: decode_all(
            model, tok, held, ["sample_mean", "sample_median"], settings, "arithmetic"
        ),
    }
    seconds: dict[str, list[float]] = {name: [] for name in passes}
    for _ in range(args.reps):
        for name, run in passes.items():
            began = time.process_time()
            run()
            seconds[name].append(time.process_time() - began)
    first = min(seconds["primary number_first"])
    result = {
        "model": args.model,
        "questions": args.questions,
        "samples": args.samples,
        "max_new_tokens": TOKENS,
        "batch": BATCH,
        "cpu_seconds": {name: round(min(v), 2) for name, v in seconds.items()},
        "times_primary": {name: round(min(v) / first, 2) for name, v in seconds.items()},
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
