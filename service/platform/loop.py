"""A background loop that nothing stops but `stop()`: a failing pass is logged and the
next one comes; one item's failing step is retried with backoff without holding up the
others; a watch thread starts the loop again should its thread end anyway; and `health()`
says when passes stall (a call that never returns). Given a lease, only the process
holding it runs passes; the others try to take it at every interval and stand by."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from service.store import Lease

log = logging.getLogger(__name__)


class Item(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=Item)


class SupervisedLoop:
    name = "reconciler"

    def __init__(self, interval_s: float, lease: Lease | None = None):
        self.interval_s = interval_s
        self.lease = lease
        self.leading = lease is None
        self.passes = 0
        self.restarts = 0
        self.last_pass = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Backoff after an item's step failed: id -> (consecutive failures, retry at).
        # Only pacing lives here; every fact about an item is in the database.
        self._backoff: dict[str, tuple[int, float]] = {}

    def run_once(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread = self._spawn()
        threading.Thread(target=self._supervise, name=f"{self.name}-watch", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.lease is not None:
            self.lease.release()
            self.leading = False

    def _spawn(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        thread.start()
        return thread

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.lead():
                    self.run_once()
                else:
                    self.passed()  # standing by is healthy
            except Exception:
                log.exception("%s: pass failed; going on", self.name)
            self._stop.wait(self.interval_s)

    def _supervise(self) -> None:
        """Start the loop again should its thread end anyway (a BaseException such as a
        SystemExit raised deep in a library)."""
        while not self._stop.wait(self.interval_s):
            if self._thread is not None and not self._thread.is_alive():
                log.error("%s: its thread ended; starting it again", self.name)
                self.restarts += 1
                self._thread = self._spawn()

    def lead(self) -> bool:
        """Whether this process runs passes now: it holds the lease (or has none)."""
        if self.lease is None:
            return True
        held = self.lease.acquire()
        if held != self.leading:
            change = "took the lease: following jobs" if held else "lost the lease: standing by"
            log.info("%s (pid %d) %s", self.name, os.getpid(), change)
            self.leading = held
        return held

    def passed(self) -> None:
        self.passes += 1
        self.last_pass = time.monotonic()

    def health(self) -> str:
        """ "ok", "not started", or what is wrong (a dead thread, a stalled pass)."""
        if self._thread is None:
            return "not started"
        if not self._thread.is_alive():
            return f"error: the {self.name} thread has ended (its watch starts it again)"
        late = time.monotonic() - self.last_pass
        # Generous: a reconciler pass also registers finished jobs (copying checkpoints).
        if late > max(300.0, 20 * self.interval_s):
            return f"error: stalled (no pass completed for {late:.0f} s)"
        return "ok"

    def isolated(self, item: T, step: Callable[[T], object]) -> None:
        """One item's step; its failure is logged and retried with backoff, never stops
        the others (or the loop)."""
        failures, retry_at = self._backoff.get(item.id, (0, 0.0))
        if time.monotonic() < retry_at:
            return
        try:
            step(item)
        except Exception:
            failures += 1
            delay = min(60.0, self.interval_s * 2 ** (failures - 1))
            self._backoff[item.id] = (failures, time.monotonic() + delay)
            log.exception(
                "%s: %s failed (%d in a row); retry in %.0f s", self.name, item.id, failures, delay
            )
        else:
            self._backoff.pop(item.id, None)

    def forget_all_but(self, ids: set[str]) -> None:
        """Drop the backoff of items no longer followed."""
        self._backoff = {k: v for k, v in self._backoff.items() if k in ids}
