"""The serving app's parts that need no Ray: its settings, the token and reference caches,
how batched work is grouped, and the bodies of `/v1/predict` and of the OpenAI-compatible
completions, chat completions and models endpoints (what the `openai` client sends and parses).

Requests forbid unknown fields: an OpenAI option numtune does not implement (`stop`,
`logprobs`, `n > 1`, ...) is a 422 naming it, never silently ignored.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from jobs.infer import Completion, Decoding, NumericPredictor
from service import errors
from service.serving.calibration import Estimate, ServedCalibration, ServedPrediction

MAX_PROMPTS = 64  # prompts in one request: one request must not hold a replica for long
MAX_NEW_TOKENS = 512  # the tiny models' max_position_embeddings; larger models allow more
MAX_SEED = 2**63 - 1  # torch.manual_seed takes a signed 64-bit integer; past it, it raises


class ServeConfig(BaseSettings):
    """Serving knobs, NUMTUNE_SERVE_* (the port is Settings.serve_port, NUMTUNE_SERVE_PORT)."""

    model_config = SettingsConfigDict(env_prefix="NUMTUNE_SERVE_", extra="ignore")

    # Loopback in the embedded default; a container on a private network sets 0.0.0.0.
    host: str = "127.0.0.1"
    min_replicas: int = Field(1, ge=1)
    max_replicas: int = Field(1, ge=1)  # above min_replicas: autoscaling on
    target_ongoing_requests: float = Field(8.0, gt=0)
    max_ongoing_requests: int = Field(64, ge=1)
    replica_cpus: float = Field(1.0, gt=0)
    batching: bool = True
    max_batch_size: int = Field(16, ge=1)
    batch_wait_s: float = Field(0.01, ge=0)
    max_models_per_replica: int = Field(3, ge=1)
    # What one request may cost (service/serving/limits.py): its body, each prompt's
    # tokens, its token budget (rows generated × (longest prompt + new tokens)) and the
    # seconds its generation may run before it is cut off and answered 504.
    max_body_bytes: int = Field(256_000, ge=1024)
    max_prompt_tokens: int = Field(256, ge=1)
    max_request_tokens: int = Field(16_384, ge=1)
    request_timeout_s: float = Field(60.0, gt=0)


class ReplicaConfig(BaseModel):
    """What a replica needs, in plain fields (it is pickled to the replica's process)."""

    database_url: str
    storage_root: str
    cache_dir: str
    token_cache_s: float
    serve: ServeConfig


@dataclass
class Work:
    """One request's share of a batch: its prompts and the call's keyword arguments."""

    kind: Literal["predict", "complete"]
    ref: str  # immutable "name:version": the multiplexed model id
    prompts: list[str]
    options: dict[str, Any]
    owner: str  # whose turn the call takes: owners take turns at the replica's compute

    def group(self) -> tuple[Any, ...]:
        key = (self.kind, self.ref, self.owner, tuple(sorted(self.options.items())))
        # A seeded request is reproducible only alone: merged prompts would share its RNG.
        return (*key, id(self)) if self.options.get("seed") is not None else key

    def call(self, predictor: NumericPredictor, prompts: list[str]) -> list[Any]:
        if self.kind == "predict":
            return list(predictor.predict(prompts, **self.options))
        return list(predictor.complete(prompts, **self.options))


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PredictRequest(Strict):
    model: str = Field(min_length=1, max_length=140, description='"name@alias" or "name:3"')
    prompts: list[str] = Field(min_length=1, max_length=MAX_PROMPTS)
    max_new_tokens: int = Field(16, ge=1, le=MAX_NEW_TOKENS)
    decoding: Decoding = "greedy"
    samples: int = Field(16, ge=0, le=256, description="K sampled completions (0: no stats)")
    interval_mass: float = Field(0.9, gt=0.0, lt=1.0)
    temperature: float = Field(1.0, gt=0.0, le=10.0, description="of the K samples")
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    # Which number `estimate` holds (service/serving/calibration.py); none: the text's.
    estimate: Estimate | None = None

    @property
    def rows_per_prompt(self) -> int:
        """Generated rows per prompt: the greedy answer and the K samples."""
        return 1 + self.samples


class PredictResponse(BaseModel):
    model: str  # the reference as asked ("arith@production")
    version: int  # the version it resolved to
    ref: str  # that version's immutable reference ("arith:3")
    predictions: list[ServedPrediction]
    calibration: ServedCalibration  # whether the intervals carry the version's calibration


class Sampling(Strict):
    """The options /v1/completions and /v1/chat/completions share."""

    model: str = Field(min_length=1, max_length=140)
    max_tokens: int | None = Field(None, ge=1, le=MAX_NEW_TOKENS)
    temperature: float = Field(1.0, ge=0.0, le=2.0)  # OpenAI's default; 0 is greedy
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    n: int = Field(1, ge=1, le=1, description="one choice per prompt")
    stream: bool = False
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    user: str | None = None  # accepted for compatibility, not used

    def generation(self, max_tokens: int | None) -> dict[str, Any]:
        """Keyword arguments of NumericPredictor.complete/stream."""
        return {
            "max_new_tokens": max_tokens or 16,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
        }


class CompletionRequest(Sampling):
    prompt: str | list[str]

    @field_validator("prompt")
    @classmethod
    def _prompts(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and not 1 <= len(value) <= MAX_PROMPTS:
            raise ValueError(f"give 1 to {MAX_PROMPTS} prompts")
        return value

    @property
    def prompts(self) -> list[str]:
        return [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)


class ChatMessage(Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str
    name: str | None = None


class ChatRequest(Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_NEW_TOKENS)

    @field_validator("messages")
    @classmethod
    def _one_question(cls, value: list[ChatMessage]) -> list[ChatMessage]:
        # numtune models are fine-tuned on one user question formatted by the chat
        # template; a system prompt or history would be a format they never saw.
        if len(value) != 1 or value[0].role != "user":
            raise ValueError("numtune models answer one question: send one message, role user")
        return value

    @property
    def question(self) -> str:
        return self.messages[0].content

    @property
    def token_budget(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


def usage(outs: list[Completion]) -> dict[str, int]:
    prompt = sum(o.prompt_tokens for o in outs)
    completion = sum(o.completion_tokens for o in outs)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion_body(model: str, outs: list[Completion]) -> dict[str, Any]:
    choices = [
        {"index": i, "text": o.text, "finish_reason": o.finish_reason, "logprobs": None}
        for i, o in enumerate(outs)
    ]
    return {
        "id": new_id("cmpl"),
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage(outs),
    }


def chat_body(model: str, out: Completion) -> dict[str, Any]:
    message = {"role": "assistant", "content": out.text}
    return {
        "id": new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": out.finish_reason}],
        "usage": usage([out]),
    }


def sse(data: dict[str, Any] | str) -> str:
    """One server-sent event as the OpenAI streams frame it."""
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


def stream_events(
    pieces: Iterator[str],
    *,
    model: str,
    chat: bool,
    finish_reason: Callable[[str], str],
    failures: tuple[type[Exception], ...],
) -> Iterator[str]:
    """SSE chunks of one streamed choice, then `[DONE]`. `finish_reason(text)` tells stop
    from length once the text is complete; an error among `failures` after the response
    has started becomes an `{"error": ...}` event (the openai client raises it)."""
    head = {
        "id": new_id("chatcmpl" if chat else "cmpl"),
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(text: str | None, finish: str | None) -> str:
        if chat:
            delta = {} if text is None else {"content": text}
            choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text or "", "finish_reason": finish, "logprobs": None}
        return sse({**head, "choices": [choice]})

    if chat:
        yield sse({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "finish_reason": None}]})  # fmt: skip
    text = []
    try:
        for piece in pieces:
            text.append(piece)
            yield chunk(piece, None)
    except failures as error:
        yield sse({"error": {"message": str(error), "type": type(error).__name__}})
        yield sse("[DONE]")
        return
    yield chunk(None, finish_reason("".join(text)))
    yield sse("[DONE]")


def model_entry(ref: str, created: int, owner: str) -> dict[str, Any]:
    return {"id": ref, "object": "model", "created": created, "owned_by": owner}


OPENAI_ROUTES = ("/v1/completions", "/v1/chat/completions", "/v1/models")


def error_body(request: Request, code: str, detail: Any) -> dict[str, Any]:
    """OpenAI's error shape on the OpenAI routes, numtune's everywhere else."""
    if request.url.path.startswith(OPENAI_ROUTES):
        return openai_error(code, detail)
    return errors.error_body(code, detail)


# OpenAI's error types by our codes; anything else a caller sent wrong is a request error.
OPENAI_TYPES = {
    "unauthorized": "authentication_error",
    "forbidden": "permission_error",
    "not_found": "not_found_error",
    "internal": "api_error",
}


def openai_error(code: str, detail: Any) -> dict[str, Any]:
    """An error in OpenAI's shape, so the openai client fills message, type, param, code."""
    param = None
    if isinstance(detail, list):  # field problems: [{field, message}, ...]
        param = detail[0]["field"] if detail else None
        detail = "; ".join(f"{d['field']}: {d['message']}" for d in detail)
    error_type = OPENAI_TYPES.get(code, "invalid_request_error")
    return {"error": {"message": str(detail), "type": error_type, "param": param, "code": code}}
