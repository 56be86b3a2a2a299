"""vLLM's side of the vLLM engine: run as `python -m jobs.engines.vllm_worker` by the Python
of `.venv-vllm`, with the checkout on PYTHONPATH (jobs/engines/vllm_engine.py starts it).

It imports vLLM, torch and this package's torch-only rule, nothing else of numtune: the
environment it runs in has vLLM's pins, not numtune's. Protocol, one JSON object a line:

    stdin, first line   {"model": folder, "dtype": "bfloat16", "kv_cache_gib": 1,
                         "max_model_len": null, "max_lora_rank": null}
    stdout, once ready  {"ready": true, "vllm": "<version>"}
    stdin, each call    {"prompts": [[ids]], "max_tokens": M, "greedy": bool,
                         "number_ids": [ids] | null, "samples": K, "temperature": T,
                         "top_p": p, "seed": s | null, "deadline_s": seconds | null,
                         "lora": [name, id, adapter folder] | null,
                         "numeric": {"mode", "ids", "values", "lengths"} | null,
                         "stream": bool}
    stdout, its answer  {"rows": [[ids]], "ended": [bool]} or {"error": "..."}; with
                        "stream", {"partial": [ids]} lines (the first row so far) before it

A call's rows: first each prompt's greedy row when "greedy" (temperature 0, number-first
when "number_ids" is given, then the numeric decoding "numeric" names), then K sampled rows
per prompt (prompt i at i·K … i·K + K − 1).
Sampled row j of a seeded call has its own seed derived from (s, j), so the same call gives
the same rows. Past "deadline_s" the unfinished rows stop where they are (ended false).
With "max_lora_rank" the engine serves LoRA adapters (peft folders) on its model, each call
naming its own ("lora"), vLLM's multi-LoRA: adapters of one base batch together.
The worker ends when its stdin closes: the replica that started it has gone.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import torch
import vllm
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
from vllm.lora.request import LoRARequest
from vllm.platforms import current_platform
from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from jobs.engines.number_rule import NumberTable, number_mask, numbers_first, numeric_choice

# Kills the worker's process group (vLLM's engine processes with it) once the worker has
# ended, however it ended: its parent changes when it does.
WATCHDOG = """import os, signal, time
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.5)
os.killpg(0, signal.SIGKILL)
"""
NUMBER_IDS = "numtune_number_ids"  # SamplingParams.extra_args key: number-first's tokens
NUMERIC = "numtune_numeric"  # and the numeric decoding's: mode, ids, values, digit lengths
CALLS = itertools.count()  # numbers each call: its request ids
SEED_STRIDE = 1_000_003  # sampled row j of seed s draws with seed s · stride + j


class NumericGreedy(LogitsProcessor):
    """numtune's greedy rules (jobs/engines/number_rule.py) on the batch rows whose request
    asks for them: number-first, then a numeric decoding. vLLM tells which rows those are
    as requests join, leave and move in its batch."""

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.rows: dict[int, dict[str, Any]] = {}  # batch row -> its request's extra_args
        self.masks: dict[tuple[tuple[int, ...], int], torch.Tensor] = {}
        self.tables: dict[tuple[tuple[int, ...], int], NumberTable] = {}

    def is_argmax_invariant(self) -> bool:
        return False  # it changes greedy's choice: that is what it is for

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for row in batch_update.removed:
            self.rows.pop(row, None)
        for row, params, _, _ in batch_update.added:
            asks = params.extra_args or {}
            if asks.get(NUMBER_IDS) or asks.get(NUMERIC):
                self.rows[row] = asks
            else:
                self.rows.pop(row, None)
        for a, b, direction in batch_update.moved:
            at_a, at_b = self.rows.pop(a, None), self.rows.pop(b, None)
            if at_a is not None:
                self.rows[b] = at_a
            if direction == MoveDirectionality.SWAP and at_b is not None:
                self.rows[a] = at_b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """logits: [R, V] of the batch's rows; the rows that ask for a rule changed."""
        width = logits.shape[-1]
        for row, asks in self.rows.items():
            scores = logits[row : row + 1]  # [1, V]
            if ids := asks.get(NUMBER_IDS):
                key = (tuple(ids), width)
                if key not in self.masks:
                    self.masks[key] = number_mask(torch.tensor(ids), width, logits.device)
                scores = numbers_first(scores, self.masks[key])
            if numeric := asks.get(NUMERIC):
                key = (tuple(numeric["ids"]), width)
                if key not in self.tables:
                    table = NumberTable.of(
                        numeric["ids"], numeric["values"], numeric["lengths"], width
                    )
                    self.tables[key] = table.to(logits.device)
                scores = numeric_choice(scores, self.tables[key], numeric["mode"])
            logits[row : row + 1] = scores
        return logits


def sampling(call: dict[str, Any]) -> list[SamplingParams]:
    """The SamplingParams of each row of a call (module docstring: greedy rows, then K per
    prompt), in the order of the rows."""
    common = {"max_tokens": int(call["max_tokens"]), "detokenize": False}
    prompts = len(call["prompts"])
    out = []
    if call["greedy"]:
        asks = {NUMBER_IDS: call.get("number_ids"), NUMERIC: call.get("numeric")}
        extra = {k: v for k, v in asks.items() if v} or None
        out += [SamplingParams(temperature=0.0, extra_args=extra, **common)] * prompts
    seed, k = call.get("seed"), int(call["samples"])
    for _ in range(prompts):
        for j in range(k):
            drawn = None if seed is None else (int(seed) * SEED_STRIDE + j) % 2**63
            out.append(SamplingParams(
                temperature=float(call["temperature"]), top_p=float(call.get("top_p", 1.0)),
                seed=drawn, **common,
            ))  # fmt: skip
    return out


def run(llm: LLM, call: dict[str, Any], answers: TextIO) -> dict[str, Any]:
    """Every row of `call` decoded, stepping the engine so a deadline can stop it; with
    "stream", the first row's ids so far are written to `answers` after each step."""
    prompts = [TokensPrompt(prompt_token_ids=list(ids)) for ids in call["prompts"]]
    k = int(call["samples"])
    rows = ([*prompts] if call["greedy"] else []) + [p for p in prompts for _ in range(k)]
    engine = llm.llm_engine
    call_id = next(CALLS)  # request ids unique across calls, even after a failed one
    ids = [f"c{call_id}r{i}" for i in range(len(rows))]
    lora = LoRARequest(*call["lora"]) if call.get("lora") else None
    limit = call.get("deadline_s")
    deadline = None if limit is None else time.monotonic() + float(limit)
    tokens: dict[str, list[int]] = {i: [] for i in ids}
    finished: dict[str, str | None] = dict.fromkeys(ids)  # each row's finish reason
    try:
        for request, prompt, params in zip(ids, rows, sampling(call), strict=True):
            engine.add_request(request, prompt, params, lora_request=lora)
        while engine.has_unfinished_requests():
            if deadline is not None and time.monotonic() > deadline:
                break
            for out in engine.step():
                tokens[out.request_id] = list(out.outputs[0].token_ids)
                finished[out.request_id] = out.outputs[0].finish_reason
            if call.get("stream"):
                send(answers, {"partial": tokens[ids[0]]})
    finally:  # past the deadline, or failed: nothing of this call stays in the engine
        engine.abort_request([i for i in ids if finished[i] is None])
    ended = [finished[i] == "stop" for i in ids]
    return {"rows": [tokens[i] for i in ids], "ended": ended}


def serve(llm: LLM, calls: TextIO, answers: TextIO) -> None:
    """One answer line per call line until stdin closes."""
    for line in calls:
        try:
            answer = run(llm, json.loads(line), answers)
        # The replica gets the error as text and raises it there; the worker goes on.
        except Exception as error:  # noqa: BLE001
            answer = {"error": f"{type(error).__name__}: {error}"}
        send(answers, answer)


def send(answers: TextIO, answer: dict[str, Any]) -> None:
    answers.write(json.dumps(answer) + "\n")
    answers.flush()


def unsupported(folder: str) -> str | None:
    """Why vLLM's CPU attention cannot run the model, known before it loads (otherwise it
    fails only at the first decode, ~30 s later); None where it can, or not on a CPU."""
    if not current_platform.is_cpu():
        return None
    config = json.loads((Path(folder) / "config.json").read_text())
    head = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    sizes = CPUAttentionBackend.get_supported_head_sizes()
    return None if head in sizes else f"head size {head}: vLLM's CPU attention takes {sizes}"


def lora_options(rank: int | None) -> dict[str, Any]:
    """LLM's options for serving adapters up to `rank`; none without a rank."""
    return {} if rank is None else {"enable_lora": True, "max_lora_rank": rank, "max_loras": 4}


def main() -> None:
    # The protocol has stdout to itself: what vLLM and its libraries print goes to stderr.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    config = json.loads(sys.stdin.readline())
    why = unsupported(config["model"])
    if why is not None:
        send(answers, {"error": why})
        return
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(int(config.get("kv_cache_gib", 1)))
    # vLLM runs its engine in child processes (in this one, 6× slower on CPU), which outlive
    # this process when it is killed, holding GBs each. A watchdog ends them all: this
    # process leads its own process group (VllmEngine starts it in a new session).
    if os.getpgid(0) != os.getpid():
        os.setpgid(0, 0)  # started without a session of its own: lead a group all the same
    subprocess.Popen([sys.executable, "-c", WATCHDOG])

    llm = LLM(
        model=config["model"],
        dtype=config.get("dtype", "bfloat16"),
        enforce_eager=True,  # compiling takes minutes on these CPUs; eager starts in ~30 s
        load_format="safetensors",  # numtune's rule: weights from safetensors only, no pickle
        max_model_len=config.get("max_model_len"),  # None: the model's own
        # numtune sends token ids and reads them itself: vLLM needs no tokenizer.
        skip_tokenizer_init=True,
        **lora_options(config.get("max_lora_rank")),
        # By name: vLLM's engine process imports it there (this file runs as __main__).
        logits_processors=["jobs.engines.vllm_worker:NumericGreedy"],
        seed=0,
    )
    send(answers, {"ready": True, "vllm": vllm.__version__})
    serve(llm, sys.stdin, answers)


if __name__ == "__main__":
    main()
