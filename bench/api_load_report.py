"""bench/api_load.py's goals, and its result as a picture (PNG) and a table (text)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

GOAL_P99_MS, GOAL_GET_RPS = 100.0, 1000.0


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    post = result["post_jobs"]
    lat = np.asarray(post["latencies_ms"])  # [POST requests], ms
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), width_ratios=[2, 1])
    bins = np.logspace(np.log10(max(lat.min(), 0.1)), np.log10(lat.max() * 1.05), 40)
    left.hist(lat, bins=bins, color="#4477aa")
    left.set_xscale("log")
    for label, x, style in (
        (f"p50 {post['p50_ms']:.1f} ms", post["p50_ms"], "-"),
        (f"p99 {post['p99_ms']:.1f} ms", post["p99_ms"], "--"),
        (f"goal p99 ≤ {GOAL_P99_MS:.0f} ms", GOAL_P99_MS, ":"),
    ):
        left.axvline(x, color="black" if "goal" not in label else "red", ls=style, label=label)
    conc = result["settings"]["concurrency"]
    left.set(xlabel="latency (ms, log)", ylabel="requests")
    left.set_title(f"POST /v1/jobs at {conc} concurrent clients ({post['requests']} requests)")
    left.legend()
    bars = {"httpx": result["get_job_httpx"]["rps"]}
    if result["get_job_wrk"]:
        bars["wrk"] = result["get_job_wrk"]["rps"]
    right.bar(list(bars), list(bars.values()), color=["#66ccee", "#228833"][: len(bars)])
    right.axhline(GOAL_GET_RPS, color="red", ls=":", label=f"goal {GOAL_GET_RPS:.0f}/s")
    right.set(ylabel="requests / s", title="GET /v1/jobs/{id}")
    right.legend()
    load = result["load_average_1_5_15"]["before"][0]
    setup = result["settings"]
    fig.suptitle(
        f"numtune API, {setup.get('workers', 1)} worker(s), {setup['database']}, on "
        f"{result['machine']['cores']} cores, {result['commit']}, "
        f"1-min load average {load:.1f} at start"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(result: dict[str, Any]) -> str:
    lines = [f"{'':24}{'requests':>9}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'srv CPU ms':>11}"]
    parts = {"POST /v1/jobs": "post_jobs", "GET /v1/jobs/{id} httpx": "get_job_httpx"}
    for name, part in {**parts, "GET /v1/jobs/{id} wrk": "get_job_wrk"}.items():
        if r := result[part]:
            cells = [r["requests"], r["rps"], r.get("p50_ms", "-"), r.get("p99_ms", "-")]
            row = "".join(f"{c:>9}" for c in cells)
            lines.append(f"{name:24}{row}{r['server_cpu_ms_per_request']:>11}")
    goals = result["goals"]
    lines.append(
        f"goals: POST p99 <= {GOAL_P99_MS:.0f} ms {'met' if goals['post_p99_met'] else 'MISSED'};"
        f" GET >= {GOAL_GET_RPS:.0f}/s ({goals['get_rps_judged_on']})"
        f" {'met' if goals['get_rps_met'] else 'MISSED'};"
        f" load average at start {result['load_average_1_5_15']['before']}"
    )
    return "\n".join(lines)
