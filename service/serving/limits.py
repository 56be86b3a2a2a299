"""Bounds on the work one serving request can cause, and turns between owners.

A replica computes one model call at a time (torch's RNG is process-global and the
replica's CPUs are its own), so one request that generates for minutes blocks every
owner. Each request is therefore checked, in this order, before it reaches the model:
its token (by the route), its body size (413), its fields (422), each prompt's length
and a token budget (422 naming the limit); its generation is cut at a time limit (504);
and owners take turns at the compute: one owner's queue of calls cannot starve another's.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from jobs.infer import NumericPredictor
from service.errors import APIError, InvalidRequest, PayloadTooLarge, UnsupportedMediaType
from service.serving.api import ServeConfig, Work

log = logging.getLogger(__name__)
Body = TypeVar("Body", bound=BaseModel)


class RequestTimedOut(APIError):
    status, code = 504, "timeout"


async def read_body(request: Request, model: type[Body], max_bytes: int) -> Body:
    """The JSON body as `model`, read only after the caller's token was checked: 413 past
    `max_bytes` (declared or streamed), 415 if not JSON, 422 naming each bad field."""
    length = request.headers.get("content-length")
    too_large = PayloadTooLarge(f"request bodies are limited to {max_bytes} bytes")
    if length is not None and (not length.isdigit() or int(length) > max_bytes):
        raise too_large
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise UnsupportedMediaType(f"send application/json, not {media or 'none'}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise too_large
        chunks.append(chunk)
    try:
        return model.model_validate_json(b"".join(chunks))
    except ValidationError as error:
        raise RequestValidationError(error.errors()) from error


def check_budget(
    config: ServeConfig,
    lengths: Sequence[int],
    *,
    rows_per_prompt: int,
    max_new_tokens: int,
    field: str,
) -> None:
    """422 when a prompt is longer than max_prompt_tokens, or when the request would
    generate more than max_request_tokens token positions: prompts × rows per prompt ×
    (longest prompt + new tokens), the shape of the padded batch it becomes."""
    for i, n in enumerate(lengths):
        if n > config.max_prompt_tokens:
            where = field if len(lengths) == 1 else f"{field}[{i}]"
            raise InvalidRequest([{"field": where, "message": (
                f"the prompt is {n} tokens; the limit is {config.max_prompt_tokens}"
                " (NUMTUNE_SERVE_MAX_PROMPT_TOKENS)"
            )}])  # fmt: skip
    cost = len(lengths) * rows_per_prompt * (max(lengths) + max_new_tokens)
    if cost > config.max_request_tokens:
        raise InvalidRequest([{"field": "budget", "message": (
            f"{len(lengths)} prompt(s) × {rows_per_prompt} row(s) × ({max(lengths)} prompt +"
            f" {max_new_tokens} new tokens) = {cost} exceeds the per-request budget of"
            f" {config.max_request_tokens} (NUMTUNE_SERVE_MAX_REQUEST_TOKENS); ask for fewer"
            " prompts, samples or new tokens"
        )}])  # fmt: skip


class FairTurns:
    """One holder at a time. Waiters are granted round-robin by owner, in arrival order
    within an owner: an owner with many queued calls gets one turn, then every other
    waiting owner gets one, before its next."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queues: OrderedDict[str, deque[object]] = OrderedDict()
        self._busy = False

    def _first(self) -> object | None:
        return next(iter(self._queues.values()))[0] if self._queues else None

    @contextmanager
    def turn(self, owner: str) -> Iterator[None]:
        ticket = object()
        with self._cond:
            self._queues.setdefault(owner, deque()).append(ticket)
            while self._busy or self._first() is not ticket:
                self._cond.wait()
            queue = self._queues[owner]
            queue.popleft()
            if queue:
                self._queues.move_to_end(owner)  # its next call waits behind the others
            else:
                del self._queues[owner]
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def waiting(self) -> dict[str, int]:
        """Queued calls by owner (for tests and logs)."""
        with self._cond:
            return {owner: len(queue) for owner, queue in self._queues.items()}


def timed_call(
    work: Work, predictor: NumericPredictor, prompts: list[str], limit_s: float
) -> list[Any]:
    """The work's model call, cut off after `limit_s` (RequestTimedOut then)."""
    start = time.monotonic()
    with predictor.time_limit(limit_s):
        out = work.call(predictor, prompts)
    if time.monotonic() - start >= limit_s:
        # generate() stopped at the deadline: the answers are cut short, not answers.
        raise RequestTimedOut(
            f"generation ran past the {limit_s:g} s limit (NUMTUNE_SERVE_REQUEST_TIMEOUT_S);"
            " ask for fewer prompts, samples or new tokens"
        )
    return out


Load = Callable[[str], Awaitable[NumericPredictor]]
Call = Callable[[Work, NumericPredictor, list[str]], list[Any]]


async def run_groups(
    works: list[Work], load: Load, call: Call, expected: tuple[type[Exception], ...]
) -> list[list[Any] | Exception]:
    """Each group of works with the same model, owner and options is one model call; the
    groups wait for their turns concurrently, and a group's failure, whatever it is, is
    returned to its own requests only."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, work in enumerate(works):
        groups.setdefault(work.group(), []).append(i)

    async def one(members: list[int]) -> list[Any] | Exception:
        lead = works[members[0]]
        prompts = [p for i in members for p in works[i].prompts]
        try:
            predictor = await load(lead.ref)
            return await asyncio.to_thread(call, lead, predictor, prompts)
        # One request's fault (anything torch raises on its options) must not fail the
        # other requests batched with it: the error goes to its group alone.
        except Exception as error:
            if not isinstance(error, expected):
                log.exception("model call for %s failed", lead.ref)
            return error

    out: list[list[Any] | Exception] = [[] for _ in works]
    results = await asyncio.gather(*(one(m) for m in groups.values()))
    for members, result in zip(groups.values(), results, strict=True):
        start = 0
        for i in members:
            if isinstance(result, Exception):
                out[i] = result
            else:
                out[i] = result[start : start + len(works[i].prompts)]
                start += len(works[i].prompts)
    return out
