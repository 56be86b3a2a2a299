"""Prometheus metrics (a registry of our own, not the global one).

With one API process they live in its memory. With several workers (`numtune api
--workers N`) each worker writes its values to files in PROMETHEUS_MULTIPROC_DIR, a
fresh folder per start set before the workers exist (prometheus_client picks its storage
at import), and a scrape of any worker sums every worker's files.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

REGISTRY = CollectorRegistry(auto_describe=True)
REQUESTS = Counter(
    "numtune_http_requests", "HTTP requests", ["method", "route", "status"], registry=REGISTRY
)
LATENCY = Histogram(
    "numtune_http_request_seconds",
    "HTTP request latency",
    ["method", "route"],
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5),
    registry=REGISTRY,
)


MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def exposition(jobs: Collector) -> bytes:
    """The text a scrape gets: requests and latencies of this process, or of every worker
    summed; `jobs` is counted in the database, so once, whichever worker answers."""
    if not os.environ.get(MULTIPROC_ENV):
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(jobs)
    return generate_latest(registry)


def process_exited() -> None:
    """A worker's last word in multiprocess mode: its live gauges stop counting."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(os.getpid())


class JobsCollector(Collector):
    """Jobs by kind and status, counted in the database at scrape time."""

    def __init__(self, count: Callable[[], dict[tuple[str, str], int]]):
        self.count = count

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "numtune_jobs", "jobs by kind and status", labels=["kind", "status"]
        )
        for (kind, status), n in sorted(self.count().items()):
            family.add_metric([kind, status], n)
        yield family


class MetricsMiddleware:
    """Counts and times every request by its route template (not its raw path)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 500}

        async def send_status(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            name = getattr(route, "path", "unmatched")
            LATENCY.labels(scope["method"], name).observe(time.perf_counter() - start)
            REQUESTS.labels(scope["method"], name, str(status["code"])).inc()
