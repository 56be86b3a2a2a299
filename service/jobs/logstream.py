"""Serving a job's copied log: the whole of it streamed page by page, or followed as
server-sent events with bounds (a cap on open streams, the caller's token checked again
as the stream goes on, and an end for a stream that outlives its time limit).

A follower holds a connection and a thread hop per interval: without a cap, a client
opening many would take the process's capacity; a revoked token must stop reading; and a
job stuck in `running` must not hold a stream forever.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

from service.errors import TooManyRequests
from service.jobs.states import TERMINAL
from service.store import JobStore

PAGE = 200  # log chunks per query when streaming the whole log


def whole_log(store: JobStore, job_id: str) -> Iterator[str]:
    """The log as copied, chunk by chunk, never all of it in memory at once."""
    seq = 0
    while chunks := store.log_chunks(job_id, seq, limit=PAGE):
        yield from (text for _, text in chunks)
        seq = chunks[-1][0]


class Slot:
    """One open stream's place; given back once, when the stream ends or, for a stream
    whose body never started (the client left first: its generator's `finally` never
    runs), when the response is dropped."""

    def __init__(self, slots: StreamSlots, owner: str):
        self.slots, self.owner, self.held = slots, owner, True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.slots.give_back(self.owner)

    __del__ = release


class StreamSlots:
    """How many log streams are open, in all and per owner (in this process)."""

    def __init__(self, total: int, per_owner: int):
        self.total, self.per_owner = total, per_owner
        self.open: Counter[str] = Counter()
        self._lock = threading.Lock()

    def take(self, owner: str) -> Slot:
        """A slot for one stream of `owner`'s; 429 when none is left."""
        with self._lock:
            if sum(self.open.values()) >= self.total:
                raise TooManyRequests(f"{self.total} log streams are open; try again later")
            if self.open[owner] >= self.per_owner:
                raise TooManyRequests(
                    f"{owner} has {self.per_owner} log streams open; close one first"
                )
            self.open[owner] += 1
        return Slot(self, owner)

    def give_back(self, owner: str) -> None:
        with self._lock:
            self.open[owner] -= 1
            if self.open[owner] <= 0:
                del self.open[owner]


def _event(name: str, data: object) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


async def follow_log(
    store: JobStore,
    job_id: str,
    interval_s: float,
    *,
    allowed: Callable[[], Awaitable[bool]] | None = None,
    recheck_s: float = 30.0,
    max_s: float | None = None,
    on_close: Callable[[], None] | None = None,
) -> AsyncIterator[str]:
    """SSE: each new log chunk as one event (data lines joined by newlines give the chunk
    back exactly); while the job waits in the queue, a `queued` event whenever its place
    or what it waits for changes; then an `end` event with the final status. `allowed`
    is asked every `recheck_s` (the caller's token still valid?): a no ends the stream
    with an `error` event; after `max_s` the stream ends with the status it has then."""
    seq = 0
    waiting: tuple[int | None, str | None] | None = None
    started = checked = time.monotonic()
    try:
        while True:
            chunks = await asyncio.to_thread(store.log_chunks, job_id, seq)
            for seq, text in chunks:
                # split("\n") keeps a trailing "" when the chunk ends a line: joining the
                # data lines with "\n" gives back the chunk exactly, even cut mid-line.
                body = "".join(f"data: {line}\n" for line in text.split("\n"))
                yield f"id: {seq}\n{body}\n"
            row = await asyncio.to_thread(store.get, job_id)
            if row is None or (row.status in TERMINAL and not chunks):
                yield _event("end", {"status": row.status if row else "deleted"})
                return
            if row.status == "queued" and (row.queue_position, row.waiting_for) != waiting:
                waiting = (row.queue_position, row.waiting_for)
                yield _event("queued", {"position": waiting[0], "waiting_for": waiting[1]})
            now = time.monotonic()
            if allowed is not None and now - checked >= recheck_s:
                checked = now
                if not await allowed():
                    yield _event("error", {"error": "unauthorized", "detail": "token revoked"})
                    return
            if max_s is not None and now - started >= max_s:
                limit = f"this stream's time limit ({max_s:g} s); follow again to go on"
                yield _event("end", {"status": row.status, "detail": limit})
                return
            await asyncio.sleep(interval_s)
    finally:
        if on_close is not None:
            on_close()
