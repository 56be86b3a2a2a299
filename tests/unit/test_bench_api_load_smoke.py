"""bench/api_load.py's whole path (uvicorn process, POST and GET phases, wrk when
installed, JSON and PNG) with a handful of requests, so the benchmark cannot rot."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.bench import load


def test_api_load_runs_at_a_tiny_size(tmp_path: Path) -> None:
    bench = load("api_load")
    wrk = shutil.which("wrk") is not None
    result = bench.run(
        posts=12,
        gets=30,
        concurrency=4,
        wrk_seconds=1 if wrk else 0,
        time_cap_s=60,
        reconcile=True,
        workers=2,  # the lease and the summed metrics of several workers on the way
        db="sqlite",
        out_dir=tmp_path,
    )
    post, get = result["post_jobs"], result["get_job_httpx"]
    assert (post["requests"], get["requests"]) == (12, 30)
    assert not post["capped_by_time"] and not get["capped_by_time"]
    assert 0 < post["p50_ms"] <= post["p99_ms"] <= post["max_ms"]
    assert len(post["latencies_ms"]) == 12
    assert post["server_cpu_ms_per_request"] > 0 and get["rps"] > 0
    assert (result["get_job_wrk"] is not None) == wrk
    if wrk:
        assert result["get_job_wrk"]["requests"] > 0
    written = json.loads((tmp_path / "api_load-2w-sqlite.json").read_text())
    assert written["settings"]["concurrency"] == 4 and written["commit"]
    assert written["settings"]["workers"] == 2
    assert (tmp_path / "api_load-2w-sqlite.png").stat().st_size > 10_000
    assert "POST /v1/jobs" in bench.table(result)
