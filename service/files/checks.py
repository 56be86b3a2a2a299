"""Submit-time reads of a job's data files, shared fairly between owners, and done once per
uploaded file's content.

A JSONL or table file named by a spec is read through at submit (service/files/confinement.py):
every row parsed, every image opened. That is CPU work (a 30 MB file: seconds), so only
`slots` checks run at once in a process. They used to be one global pair, first come first
served: six submits of one owner's large file made another owner's 9 KB submit wait 22 s
(1.5 s alone). Now each owner holds at most `per_owner` of the slots and waiting owners are
served round robin, so another owner's check waits for no queue of the first owner's,
only (at worst) for a slot to free when every slot is held by a different owner.

An uploaded file never changes after its upload (write-once, by id), and its check depends
only on its bytes unless its rows name images (whose files or uploads may change since):
a file whose check passed with no image rows is remembered by the sha256 the upload
recorded, and is not read again by later submits, of any file with the same content.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

MAX_REMEMBERED = 10_000  # sha256 digests of passed files kept (64 bytes each)

# Who the checks of the current submit are for: set around a submit's confinement.
CHECKING_FOR: ContextVar[str] = ContextVar("checking_for", default="")


class OwnerTurns:
    """At most `slots` holders at once, at most `per_owner` of them one owner's; a free slot
    goes to the owner who has waited longest since their last turn (round robin), in
    arrival order within an owner. Used as `with turns:` (the owner is CHECKING_FOR's) or
    `with turns.turn(owner):`."""

    def __init__(self, slots: int = 2, per_owner: int = 1):
        self.slots, self.per_owner = slots, per_owner
        self._cond = threading.Condition()
        self._queues: OrderedDict[str, deque[object]] = OrderedDict()
        self._holding: Counter[str] = Counter()

    def _next(self) -> object | None:
        """The ticket a free slot goes to now: the first owner in line with room."""
        if sum(self._holding.values()) >= self.slots:
            return None
        for owner, queue in self._queues.items():
            if self._holding[owner] < self.per_owner:
                return queue[0]
        return None

    def acquire(self, owner: str) -> None:
        ticket = object()
        with self._cond:
            self._queues.setdefault(owner, deque()).append(ticket)
            while self._next() is not ticket:
                self._cond.wait()
            queue = self._queues.pop(owner)  # served: to the back of the line
            queue.popleft()
            if queue:
                self._queues[owner] = queue
            self._holding[owner] += 1

    def release(self, owner: str) -> None:
        with self._cond:
            self._holding[owner] -= 1
            self._cond.notify_all()

    @contextmanager
    def turn(self, owner: str) -> Iterator[None]:
        self.acquire(owner)
        try:
            yield
        finally:
            self.release(owner)

    def __enter__(self) -> None:
        # The owner is read once: the exit releases that owner's slot even if the context
        # variable changed in between.
        owner = CHECKING_FOR.get()
        self.acquire(owner)
        _entered().append(owner)

    def __exit__(self, *exc: object) -> None:
        self.release(_entered().pop())

    def holding(self) -> dict[str, int]:
        """Slots held by owner (for tests and logs)."""
        with self._cond:
            return {o: n for o, n in self._holding.items() if n}

    def waiting(self) -> dict[str, int]:
        """Queued checks by owner (for tests and logs)."""
        with self._cond:
            return {o: len(q) for o, q in self._queues.items()}


_LOCAL = threading.local()


def _entered() -> list[str]:
    """This thread's `with turns:` owners, innermost last."""
    stack: list[str] = _LOCAL.__dict__.setdefault("owners", [])
    return stack


class PassedFiles:
    """sha256 digests of uploaded files whose check passed with no image rows (bounded:
    the oldest forgotten first, then read again once)."""

    def __init__(self, limit: int = MAX_REMEMBERED):
        self.limit = limit
        self._lock = threading.Lock()
        self._digests: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, digest: object) -> bool:
        with self._lock:
            return digest in self._digests

    def add(self, digest: str) -> None:
        with self._lock:
            self._digests[digest] = None
            self._digests.move_to_end(digest)
            while len(self._digests) > self.limit:
                self._digests.popitem(last=False)


def uploaded_digest(resolve: object, location: str) -> str | None:
    """The sha256 the upload recorded for a location `resolve` (a submission's file
    resolver, service/jobs/submit.py) resolved an uploaded file id to; None for anything
    else (a path in the data roots is read every time: it may change)."""
    digests = getattr(resolve, "digests", None)
    return digests.get(location) if isinstance(digests, dict) else None


PASSED = PassedFiles()
