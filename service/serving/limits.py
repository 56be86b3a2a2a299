"""Bounds on the work one serving request can cause, and turns between owners.

A replica computes one model call at a time (torch's RNG is process-global and the
replica's CPUs are its own), so one request that generates for minutes blocks every
owner. Each request is therefore checked, in this order, before it reaches the model:
its token (by the route), its body size (413), its fields (422), each prompt's length
and a token budget (422 naming the limit); its generation is cut at a time limit (504);
and owners take turns at the compute: one owner's queue of calls cannot starve another's,
within a batch or across batches (run_groups).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import Executor
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
# serve.batch's max_concurrent_batches for the replica: more than it can ever have. Serve forms
# a batch first and then waits for one of these slots, in arrival order; with 4 slots, one
# owner's 8 heavy requests (8 batches) held 4 and queued 4 ahead of another owner's batch,
# which reached the turns only after 5 of them ran (issue 45, M4: 89.8 s). Every batch holds
# at least one ongoing request, so max_ongoing_requests (ServeConfig, 64) bounds how many
# exist; Serve logs a warning that max_batch_size × this exceeds it, which is the point.
BATCHES = 4096


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
) -> int:
    """422 when a prompt is longer than max_prompt_tokens, or when the request would
    generate more than max_request_tokens token positions: prompts × rows per prompt ×
    (longest prompt + new tokens), the shape of the padded batch it becomes. Returns that
    cost."""
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
    return cost


class FairTurns:
    """One holder at a time. Waiters are granted round-robin by owner, in arrival order
    within an owner: an owner with many queued calls gets one turn, then every other
    waiting owner gets one, before its next. An owner who starts waiting goes before the
    owners who have had a turn since they began waiting: a small request arriving behind
    a heavy owner's queue waits for the call in progress, not for that queue."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queues: OrderedDict[str, deque[object]] = OrderedDict()
        # Owners holding the turn, or waiting after a turn since they began waiting.
        self._served: set[str] = set()
        self._busy = False

    def _enqueue(self, owner: str, ticket: object) -> None:
        if owner in self._queues:
            self._queues[owner].append(ticket)
            return
        order = list(self._queues.items())
        at = len(order)  # the holder's next call goes last
        if owner not in self._served:
            at = next((i for i, (o, _) in enumerate(order) if o in self._served), at)
        order.insert(at, (owner, deque([ticket])))
        self._queues = OrderedDict(order)

    def _first(self) -> object | None:
        return next(iter(self._queues.values()))[0] if self._queues else None

    @contextmanager
    def turn(self, owner: str) -> Iterator[None]:
        ticket = object()
        with self._cond:
            self._enqueue(owner, ticket)
            while self._busy or self._first() is not ticket:
                self._cond.wait()
            queue = self._queues[owner]
            queue.popleft()
            if queue:
                self._queues.move_to_end(owner)  # its next call waits behind the others
            else:
                del self._queues[owner]
            self._served.add(owner)
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                if owner not in self._queues:
                    self._served.discard(owner)
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


def merged(works: list[Work], budget: int) -> list[list[int]]:
    """Works with the same model, owner and options, merged into calls of at most `budget`
    token positions (one request's budget): an owner's many requests become many turns,
    not one long call that every other owner waits behind."""
    calls: dict[tuple[Any, ...], list[list[int]]] = {}
    for i, work in enumerate(works):
        chunks = calls.setdefault(work.group(), [[]])
        if chunks[-1] and sum(works[j].cost for j in chunks[-1]) + work.cost > budget:
            chunks.append([])
        chunks[-1].append(i)
    return [chunk for chunks in calls.values() for chunk in chunks]


async def run_groups(
    works: list[Work],
    load: Load,
    call: Call,
    expected: tuple[type[Exception], ...],
    budget: int,
    executor: Executor | None = None,
) -> list[list[Any] | Exception]:
    """Each call of `merged` works is one model call; the calls wait for their turns
    concurrently (in `executor`'s threads: one per waiting call, so that waiting calls of
    one batch never hold up another batch's), and a call's failure, whatever it is, is
    returned to its own requests only."""
    groups = {i: members for i, members in enumerate(merged(works, budget))}

    async def one(members: list[int]) -> list[Any] | Exception:
        lead = works[members[0]]
        prompts = [p for i in members for p in works[i].prompts]
        try:
            predictor = await load(lead.ref)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(executor, call, lead, predictor, prompts)
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
