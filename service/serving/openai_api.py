"""The OpenAI-compatible side of serving: the bodies of `/v1/completions`,
`/v1/chat/completions` (plain and streamed as server-sent events) and `/v1/models`, and
errors in OpenAI's shape, so the `openai` client sends and parses them unchanged.

Requests forbid unknown fields: an OpenAI option numtune does not implement (`stop`,
`logprobs`, `n > 1`, ...) is a 422 naming it, never silently ignored.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Annotated, Any, Literal

from fastapi import Request
from fastapi.responses import StreamingResponse
from pydantic import Field, field_validator

from jobs.infer import Completion, NumericPredictor
from service import errors
from service.serving.api import (
    MAX_NEW_TOKENS,
    MAX_PROMPTS,
    MAX_SEED,
    ImageReader,
    Strict,
    decode_image,
)


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


class ImageURL(Strict):
    url: str = Field(min_length=1)
    detail: Literal["auto", "low", "high"] | None = None  # accepted; the tower's size rules


class TextPart(Strict):
    type: Literal["text"]
    text: str


class ImagePart(Strict):
    type: Literal["image_url"]
    image_url: ImageURL


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class ChatMessage(Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    # A string, or OpenAI's content parts: text, and at most one image as a data URL.
    content: str | list[ContentPart]
    name: str | None = None

    @field_validator("content")
    @classmethod
    def _one_image(cls, value: str | list[Any]) -> str | list[Any]:
        if isinstance(value, list) and sum(isinstance(p, ImagePart) for p in value) > 1:
            raise ValueError("numtune models look at one image per question")
        return value


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
        content = self.messages[0].content
        if isinstance(content, str):
            return content
        return "\n".join(p.text for p in content if isinstance(p, TextPart))

    def image(self, uploaded: ImageReader | None = None) -> bytes | None:
        """The question's checked image (a 422 naming its part if it is not one): a data URL,
        or the id of an image the caller uploaded ({"url": "file-…"}, read via `uploaded`)."""
        content = self.messages[0].content
        for i, part in enumerate(content if isinstance(content, list) else []):
            if isinstance(part, ImagePart):
                field, url = f"messages[0].content[{i}].image_url.url", part.image_url.url
                if not url.startswith(("data:", "file-")):
                    raise errors.InvalidRequest([{"field": field, "message": (
                        "send the image inline as a data URL (data:image/png;base64,...) or"
                        " as an uploaded image's file id (file-...); numtune fetches nothing"
                    )}])  # fmt: skip
                return decode_image(url, field, uploaded)
        return None

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


def streamed(
    predictor: NumericPredictor,
    prompt: str,
    options: dict[str, Any],
    *,
    model: str,
    turn: Callable[[], AbstractContextManager[None]],
    timeout_s: float,
    failures: tuple[type[Exception], ...],
    images: list[bytes | None] | None = None,
) -> StreamingResponse:
    """One prompt's completion (with its image, if any) streamed as SSE; `turn()` holds the
    replica's compute for the generation and is released if the client leaves; the time
    limit cuts the generation (a stream's answer is then simply shorter)."""
    limit = int(options["max_new_tokens"])

    def finish_reason(text: str) -> str:
        # stream() yields text, not token ids: re-tokenising the whole text counts the
        # generated tokens (exact for the digit tokenizers; ±1 token at worst elsewhere).
        used = len(predictor.tokenizer(text, add_special_tokens=False)["input_ids"])
        return "length" if used >= limit else "stop"

    def events() -> Iterator[str]:
        with turn(), predictor.time_limit(timeout_s):
            yield from stream_events(
                predictor.stream(prompt, images=images, **options), model=model,
                chat=bool(options["chat"]),
                finish_reason=finish_reason, failures=failures,
            )  # fmt: skip

    return StreamingResponse(events(), media_type="text/event-stream")


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
