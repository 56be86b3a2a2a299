"""numtune's side of the vLLM engine: one worker process (jobs/engines/vllm_worker.py) per
model folder, started with `.venv-vllm`'s Python, asked for token ids by JSON lines.

One call at a time (a lock): the serving replica already runs one model call at a time,
owners taking turns, and a call's prompts and samples are one batch for vLLM's scheduler.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jobs

log = logging.getLogger(__name__)
# The folder holding the `jobs` package: the worker imports jobs.engines from it.
CHECKOUT = str(Path(jobs.__path__[0]).parent)
VLLM_PYTHON = f"{CHECKOUT}/.venv-vllm/bin/python"  # what `make setup` builds
# The worker imports jobs.engines from the checkout, and reaches nothing outside: vLLM
# reports usage to its authors unless told not to, and the model is a local folder.
WORKER_ENV = {
    "PYTHONPATH": CHECKOUT, "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
}  # fmt: skip
Lora = tuple[str, int, str]  # an adapter as vLLM names it: (name, integer id, peft folder)
Row = tuple[list[int], bool]  # a row's new token ids (no end-of-text) and whether it ended


class EngineError(RuntimeError):
    """The vLLM worker did not start, died, or answered a call with an error."""


@dataclass(frozen=True)
class EngineConfig:
    """How to start a worker: its interpreter and vLLM's knobs."""

    python: str = VLLM_PYTHON
    dtype: str = "bfloat16"
    kv_cache_gib: int = 1  # RAM vLLM reserves for its KV cache on CPU
    max_model_len: int | None = None  # None: the model's own
    max_lora_rank: int | None = None  # serve LoRA adapters up to this rank on the model
    start_timeout_s: float = 900.0  # ~30 s idle; minutes on a loaded 2-core machine


class VllmEngine:
    """A worker process serving one model folder (module docstring)."""

    def __init__(self, folder: str | os.PathLike[str], eos_id: int, config: EngineConfig) -> None:
        if not Path(config.python).is_file():
            raise EngineError(f"no vLLM environment at {config.python} (make setup builds it)")
        self.eos_id = eos_id
        self.lock = threading.Lock()
        # The worker's stderr (vLLM's own logging), read for errors: open while it runs.
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [config.python, "-m", "jobs.engines.vllm_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            env={**os.environ, **WORKER_ENV}, cwd=CHECKOUT,
            start_new_session=True,  # a process group of its own: its watchdog ends it whole
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, name="vllm-answers", daemon=True).start()
        started = {
            "model": str(folder), "dtype": config.dtype, "kv_cache_gib": config.kv_cache_gib,
            "max_model_len": config.max_model_len, "max_lora_rank": config.max_lora_rank,
        }  # fmt: skip
        try:
            self._send(started)
            self.version = str(self._answer(config.start_timeout_s).get("vllm", "?"))
            # One token decoded now: a model vLLM loads but cannot run (its CPU attention
            # takes some head sizes only: 16 fails) fails here, not at a user's request.
            self.decode([[eos_id]], max_new_tokens=1, greedy=True)
        except EngineError:
            self.close()
            raise

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put("")  # the worker's stdout closed: it has ended

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError as error:
            raise EngineError(f"the vLLM worker has ended: {self._tail()}") from error

    def _answer(self, timeout_s: float | None) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty as error:
            self.close()
            raise EngineError(f"the vLLM worker did not answer in {timeout_s} s") from error
        if not line:
            raise EngineError(f"the vLLM worker has ended: {self._tail()}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            cause = self._cause()
            raise EngineError(f"vLLM: {answer['error']}" + (f" ({cause})" if cause else ""))
        return answer

    def _tail(self, chars: int = 2000) -> str:
        self.log.seek(0)
        return self.log.read()[-chars:]

    def _cause(self) -> str:
        """The last exception line vLLM logged (its engine process fails with a generic
        error; the cause is in the log), without the log's own prefix."""
        causes = [line for line in self._tail(50_000).splitlines() if "Error: " in line]
        return causes[-1].rsplit("] ", 1)[-1].strip() if causes else ""

    def decode(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        greedy: bool,
        number_ids: list[int] | None = None,
        samples: int = 0,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        deadline: float | None = None,
        lora: Lora | None = None,
        numeric: dict[str, Any] | None = None,
    ) -> tuple[list[Row], list[Row]]:
        """(the greedy rows, one per prompt, or none; the K sampled rows per prompt, prompt
        i's at i·K … i·K + K − 1). `deadline`: time.monotonic() at which decoding stops;
        `lora`: the adapter to decode with (an engine started with max_lora_rank);
        `numeric`: the greedy rows' numeric decoding (mode and the number tokens' ids,
        values and digit lengths)."""
        call = _call(
            prompts, max_new_tokens, greedy=greedy, samples=samples, temperature=temperature,
            top_p=top_p, seed=seed, deadline=deadline, lora=lora,
        )  # fmt: skip
        call |= {"number_ids": number_ids, "numeric": numeric}
        with self.lock:
            self._send(call)
            answer = self._answer(None)  # the worker stops at the deadline itself
        rows = [
            self._row(ids, ended)
            for ids, ended in zip(answer["rows"], answer["ended"], strict=True)
        ]
        split = len(prompts) if greedy else 0
        return rows[:split], rows[split:]

    def stream(
        self,
        prompt: list[int],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float = 1.0,
        seed: int | None = None,
        deadline: float | None = None,
        lora: Lora | None = None,
    ) -> Iterator[tuple[Row, bool]]:
        """One completion's row as it grows, each time with whether it is the last: greedy
        at temperature 0, else one sample. A consumer that stops early leaves the call's
        remaining answers to be read here, so the next call starts clean."""
        call = _call(
            [prompt], max_new_tokens, greedy=temperature == 0, samples=int(temperature > 0),
            temperature=temperature or 1.0, top_p=top_p, seed=seed, deadline=deadline, lora=lora,
        )  # fmt: skip
        with self.lock:
            self._send(call | {"stream": True})
            over = False
            try:
                while not over:
                    answer = self._answer(None)
                    over = "partial" not in answer
                    if over:
                        yield self._row(answer["rows"][0], answer["ended"][0]), True
                    else:
                        yield (answer["partial"], False), False
            except EngineError:  # an error answer ends the call too
                over = True
                raise
            finally:
                while not over:
                    over = "partial" not in self._answer(None)

    def _row(self, ids: list[int], ended: bool) -> Row:
        """vLLM keeps the end-of-text token in a row that stopped on it; numtune's rows
        (jobs/infer/decoding.py: split_at_eos) leave it out."""
        return (ids[:-1] if ended and ids and ids[-1] == self.eos_id else ids), ended

    def close(self) -> None:
        """End the worker: its stdin closes, and it exits (killed if it has not in 30 s)."""
        if self.proc.poll() is None:
            end_worker(self.proc, timeout_s=30)
        self.log.close()


def _call(
    prompts: list[list[int]],
    max_new_tokens: int,
    *,
    greedy: bool,
    samples: int,
    temperature: float,
    top_p: float,
    seed: int | None,
    deadline: float | None,
    lora: Lora | None,
) -> dict[str, Any]:
    """A call's line for the worker (jobs/engines/vllm_worker.py's protocol)."""
    return {
        "prompts": prompts, "max_tokens": max_new_tokens, "greedy": greedy,
        "samples": samples, "temperature": temperature, "top_p": top_p, "seed": seed,
        "lora": lora,
        "deadline_s": None if deadline is None else max(deadline - time.monotonic(), 0.0),
    }  # fmt: skip


def end_worker(proc: subprocess.Popen[str], timeout_s: float) -> None:
    """End a worker that reads calls from its stdin: closing it is the signal to exit;
    killed if it has not after `timeout_s`."""
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_engine(
    folder: str | os.PathLike[str], eos_id: int, config: EngineConfig
) -> VllmEngine | None:
    """A worker on `folder`, or None where vLLM cannot run it (no environment, a model vLLM
    does not know, a failed start): transformers' generate() serves that model, as the
    replica's /readyz reports."""
    try:
        return VllmEngine(folder, eos_id, config)
    except EngineError as error:
        log.warning("vLLM cannot serve %s; generate() will: %s", folder, error)
        return None
