"""Raw-socket clients for the request-head abuse of issue 45 (N1): a header of any size sent
in 1 MB pieces (never held whole in memory), many header fields, a head or body that
trickles in; and a timer for another client's requests while that goes on. Shared by
tests/security/test_headers.py and tests/integration/test_schemathesis.py."""

from __future__ import annotations

import select
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

MB = 1024 * 1024


@dataclass
class Answer:
    status: int | None  # None: the connection closed with no response
    seconds: float  # from the first byte sent to the answer (or the close)
    sent: int  # bytes the server took before it answered or closed
    body: bytes


def big_header(path: str, size: int, extra: str = "") -> Iterator[bytes]:
    """GET `path` with one header line of `size` bytes, in 1 MB pieces."""
    yield f"GET {path} HTTP/1.1\r\nHost: numtune\r\n{extra}X-Big: ".encode()
    piece = b"a" * MB
    for _ in range(size // MB):
        yield piece
    yield b"a" * (size % MB) + b"\r\n\r\n"


def many_fields(path: str, count: int) -> list[bytes]:
    lines = "".join(f"X-F{i}: {i}\r\n" for i in range(count))
    return [f"GET {path} HTTP/1.1\r\nHost: numtune\r\n{lines}\r\n".encode()]


def trickle(first: bytes, then: bytes, every_s: float) -> Iterator[bytes]:
    """`first` at once, then `then` one byte every `every_s` seconds."""
    yield first
    for i in range(len(then)):
        time.sleep(every_s)
        yield then[i : i + 1]


def send(base_url: str, pieces: Iterable[bytes], timeout_s: float = 30.0) -> Answer:
    """Send `pieces` on one connection, stopping as soon as the server answers or closes;
    then read its answer."""
    parts = urlsplit(base_url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout_s)
    began, sent = time.monotonic(), 0
    try:
        for piece in pieces:
            if select.select([sock], [], [], 0)[0]:
                break  # the server answered (or closed) before the request was sent
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        data = _read(sock)
    finally:
        sock.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.") else None
    return Answer(status, time.monotonic() - began, sent, data.partition(b"\r\n\r\n")[2])


def _read(sock: socket.socket) -> bytes:
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return data
        if not chunk:
            return data
        data += chunk


def latencies(request: Callable[[], object], count: int) -> list[float]:
    out = []
    for _ in range(count):
        began = time.monotonic()
        request()
        out.append(time.monotonic() - began)
    return out


def during(
    attack: Callable[[], Answer], request: Callable[[], object]
) -> tuple[Answer, float, float]:
    """(the attack's answer, the median of `request`'s latency alone, the slowest
    `request` while the attack runs). The other client starts once the attack has
    begun and keeps asking until the attack is over (at least three times)."""
    baseline = statistics.median(latencies(request, 5))
    result: list[Answer] = []
    worker = threading.Thread(target=lambda: result.append(attack()), daemon=True)
    worker.start()
    time.sleep(0.05)
    slowest = 0.0
    asked = 0
    while worker.is_alive() or asked < 3:
        slowest = max(slowest, *latencies(request, 1))
        asked += 1
    worker.join()
    return result[0], baseline, slowest
