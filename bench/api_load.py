"""Control-plane load: POST /v1/jobs latency (p50/p99) at 50 concurrent clients, and
GET /v1/jobs/{id} requests per second.

    .venv/bin/python -m bench.api_load [--posts 2000] [--gets 10000] [--concurrency 50]
                                       [--wrk-seconds 10] [--time-cap 180] [--no-reconcile]
                                       [--workers 1] [--db sqlite|postgresql]

The API runs as in production: `uvicorn --factory` in its own process, `--workers`
worker processes (one of them holding the reconciler's lease), uvloop and httptools when
installed, a SQLite file database (WAL) in a throw-away NUMTUNE_HOME or a throw-away
PostgreSQL server on 127.0.0.1 (tests/support/postgres.py), the reconciler on. Only Ray
is stubbed, at the backend boundary (tests/support/stub_backend.py), and only here: its
jobs report SUCCEEDED, so each job leaves the reconciler's active set after two passes
(as `failed/no_result`: the stub writes no result.json), as jobs leave it on a real
cluster, instead of piling up.

The load generator is this process: httpx.AsyncClient with `concurrency` tasks, a fixed
number of requests and a time cap. GET rps is also measured with `wrk` (C, 1 thread) when
it is installed (Debian: `apt-get install wrk`), since a Python client on the same 2
cores takes CPU the server would use. The server's CPU time per request (its workers'
summed, from /proc) is reported too: unlike latency, it hardly depends on what else the
machine is running.
Writes bench/results/api_load.json and api_load.png (bench/api_load_report.py); other
worker counts and databases add theirs to the name (api_load-2w-postgresql.json).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

# api_load_report, and the repository's packages, also when run by file path
from bench.api_load_report import GOAL_GET_RPS, GOAL_P99_MS, plot, table
from bench.api_load_server import AUTH, HTTP, LOOP, REPO, TOKEN, api_server, cpu_seconds, database

BENCH = Path(__file__).resolve().parent
SPEC = {"name": "load", "model": {"source": "random:tiny-digit"}, "loss": {"name": "smmd"}}


async def hammer(
    url: str, requests: list[tuple[str, str]], concurrency: int, deadline: float, want: int
) -> dict[str, Any]:
    """Send (method, path) requests from `concurrency` tasks, each request as soon as its
    task's previous answer arrives (a closed loop: by Little's law mean latency is about
    concurrency / throughput); stop issuing at `deadline`. Latencies in ms."""
    body = json.dumps(SPEC).encode()
    headers = {**AUTH, "Content-Type": "application/json"}
    latencies: list[float] = []
    answers: list[str] = []
    queue = iter(requests)
    # Idle connections expire on the client before uvicorn's 5 s keep-alive timeout closes
    # them, so no request races a connection the server is closing.
    limits = httpx.Limits(
        max_connections=concurrency, max_keepalive_connections=concurrency, keepalive_expiry=2
    )
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def task() -> None:
            for method, path in queue:
                if time.monotonic() > deadline:
                    return
                start = time.perf_counter()
                content = body if method == "POST" else None
                r = await client.request(method, path, content=content, headers=headers)
                latencies.append((time.perf_counter() - start) * 1e3)
                if r.status_code != want:
                    raise RuntimeError(f"{method} {path} answered {r.status_code}: {r.text[:300]}")
                answers.append(r.text)

        start, client_cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(task() for _ in range(concurrency)))
        wall, client_cpu = time.perf_counter() - start, time.process_time() - client_cpu
    lat = np.asarray(latencies)  # [requests answered], ms
    return {
        "requests": len(lat),
        "capped_by_time": len(lat) < len(requests),
        "seconds": round(wall, 3),
        "rps": round(len(lat) / wall, 1),
        **{f"p{q}_ms": round(float(np.percentile(lat, q)), 2) for q in (50, 90, 99)},
        "max_ms": round(float(lat.max()), 2),
        "mean_ms": round(float(lat.mean()), 2),
        "client_cpu_ms_per_request": round(client_cpu / len(lat) * 1e3, 3),
        "latencies_ms": [round(x, 3) for x in latencies],
        "answers": answers,
    }


def per_request(cpu_s: float, phase: dict[str, Any]) -> float:
    """The server's CPU ms per request over a phase (the reconciler's share included)."""
    return round(cpu_s / phase["requests"] * 1e3, 3)


def run_wrk(url: str, path: str, seconds: int, concurrency: int) -> dict[str, Any]:
    cmd = ["wrk", "-t1", f"-c{concurrency}", f"-d{seconds}s", "--latency", "--timeout", "10s"]
    cmd += ["-H", f"Authorization: Bearer {TOKEN}", f"{url}{path}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=seconds + 60)
    text = out.stdout
    if "Non-2xx" in text or "Socket errors" in text:
        raise RuntimeError(f"wrk saw failed requests:\n{text}")
    unit = {"us": 1e-3, "ms": 1.0, "s": 1e3}
    pcts = {
        f"p{q}_ms": round(float(v) * unit[u], 2)
        for q, v, u in re.findall(r"^\s+(50|90|99)%\s+([\d.]+)(us|ms|s)$", text, re.M)
    }
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    total = re.search(r"(\d+) requests in", text)
    if rps is None or total is None:
        raise RuntimeError(f"could not read wrk's output:\n{text}")
    return {"seconds": seconds, "requests": int(total.group(1)), "rps": float(rps.group(1)), **pcts}


def machine() -> dict[str, Any]:
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    names = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")]
    return {
        "cpu": names[0] if names else platform.processor(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout

    head = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--", "service", "bench") else "")


def run(
    *,
    posts: int,
    gets: int,
    concurrency: int,
    wrk_seconds: int,
    time_cap_s: float,
    reconcile: bool,
    workers: int,
    db: str,
    out_dir: Path,
) -> dict[str, Any]:
    load_before = os.getloadavg()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    with (
        tempfile.TemporaryDirectory(prefix="api-load-") as home,
        database(db, Path(home)) as db_url,
        api_server(Path(home), db_url, reconcile=reconcile, workers=workers) as (url, pid),
    ):
        deadline = time.monotonic() + time_cap_s
        # Warm-up (not measured): connections, imports on first use, SQLite page cache.
        submit = ("POST", "/v1/jobs")
        warm = asyncio.run(hammer(url, [submit] * concurrency, concurrency, deadline, 202))
        cpu = cpu_seconds(pid)
        post = asyncio.run(hammer(url, [submit] * posts, concurrency, deadline, 202))
        post["server_cpu_ms_per_request"] = per_request(cpu_seconds(pid) - cpu, post)
        ids = [json.loads(a)["id"] for a in warm.pop("answers") + post.pop("answers")]
        paths = [("GET", f"/v1/jobs/{ids[i % len(ids)]}") for i in range(gets)]
        cpu = cpu_seconds(pid)
        get = asyncio.run(hammer(url, paths, concurrency, deadline, 200))
        get["server_cpu_ms_per_request"] = per_request(cpu_seconds(pid) - cpu, get)
        get.pop("answers")
        get.pop("latencies_ms")  # percentiles kept; 10k raw values are not worth storing
        wrk = None
        if wrk_seconds > 0 and shutil.which("wrk"):
            cpu = cpu_seconds(pid)
            wrk = run_wrk(url, f"/v1/jobs/{ids[0]}", wrk_seconds, concurrency)
            wrk["server_cpu_ms_per_request"] = per_request(cpu_seconds(pid) - cpu, wrk)
    best_get = wrk["rps"] if wrk else get["rps"]
    result = {
        "benchmark": "api_load",
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "commit": commit(),
        "load_average_1_5_15": {"before": load_before, "after": os.getloadavg()},
        "uptime_before": uptime,
        "settings": {
            "server": f"uvicorn --factory, {workers} worker(s), loop={LOOP}, http={HTTP}",
            "workers": workers,
            "database": "SQLite file (WAL)" if db == "sqlite" else "PostgreSQL 127.0.0.1",
            "reconciler": "on, Ray stubbed (jobs report SUCCEEDED)" if reconcile else "off",
            "client": f"httpx.AsyncClient, {concurrency} tasks, this process",
            **dict(posts=posts, gets=gets, concurrency=concurrency, time_cap_s=time_cap_s),
            "wrk_seconds": wrk_seconds if wrk else 0,
        },
        "post_jobs": post,
        "get_job_httpx": get,
        "get_job_wrk": wrk,
        "goals": dict(
            post_p99_ms=GOAL_P99_MS,
            post_p99_met=post["p99_ms"] <= GOAL_P99_MS,
            get_rps=GOAL_GET_RPS,
            get_rps_met=best_get >= GOAL_GET_RPS,
            get_rps_judged_on="wrk" if wrk else "httpx",
        ),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    name = result_name(workers, db)
    (out_dir / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, out_dir / f"{name}.png")
    return result


def result_name(workers: int, db: str) -> str:
    return "api_load" if (workers, db) == (1, "sqlite") else f"api_load-{workers}w-{db}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posts", type=int, default=2000)
    parser.add_argument("--gets", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--wrk-seconds", type=int, default=10, help="0: no wrk run")
    parser.add_argument("--time-cap", type=float, default=180.0, help="seconds, all phases")
    parser.add_argument("--no-reconcile", action="store_true", help="reconciler off")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--out", type=Path, default=BENCH / "results")
    args = parser.parse_args()
    result = run(
        posts=args.posts,
        gets=args.gets,
        concurrency=args.concurrency,
        wrk_seconds=args.wrk_seconds,
        time_cap_s=args.time_cap,
        reconcile=not args.no_reconcile,
        workers=args.workers,
        db=args.db,
        out_dir=args.out,
    )
    print(table(result))
    print(f"wrote {args.out / result_name(args.workers, args.db)}.json and .png")


if __name__ == "__main__":
    main()
