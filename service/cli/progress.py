"""`numtune submit --follow`: a live progress bar fed by the job's reported metrics."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from service.cli.client import Client
from service.jobs.states import TERMINAL

POLL_S = 1.0


def watched_metric(job: dict[str, Any]) -> str:
    """The eval metric the spec optimises (`eval_exact_match` unless it says otherwise)."""
    spec = job.get("spec") or {}
    train = (spec.get("base") or spec).get("train") or {}
    return f"eval_{train.get('metric', 'exact_match')}"


def total_steps(job: dict[str, Any]) -> int | None:
    """A job's step count; None for a sweep (its trials report steps of their own)."""
    if job.get("kind") != "job":
        return None
    steps = ((job.get("spec") or {}).get("train") or {}).get("steps")
    return int(steps) if steps else None


def summary(rows: list[dict[str, Any]], metric: str) -> tuple[int, str]:
    """(last step, "loss=… eval_…=…") from the newest rows that carry each value."""
    step = max((int(r["step"]) for r in rows if isinstance(r.get("step"), int)), default=0)
    shown = []
    for key in ("loss", metric):
        value = next((r[key] for r in reversed(rows) if isinstance(r.get(key), int | float)), None)
        if value is not None:
            shown.append(f"{key}={value:.4g}")
    return step, " ".join(shown)


def follow_job(
    client: Client, path: str, job: dict[str, Any], console: Console, poll_s: float = POLL_S
) -> dict[str, Any]:
    """Poll the job and its metrics until it ends; return its final record."""
    metric = watched_metric(job)
    rows: list[dict[str, Any]] = []
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        task = bar.add_task(f"{job['id']} {job['status']}", total=total_steps(job), info="")
        while True:
            if job["metrics_count"] > len(rows):  # fetch the series only when it grew
                rows = client.json("GET", f"{path}/metrics")["items"]
            step, info = summary(rows, metric)
            if job["status"] == "queued" and job.get("waiting_for"):
                info = (
                    f"#{job.get('queue_position')} in the queue, waiting for {job['waiting_for']}"
                )
            bar.update(task, description=f"{job['id']} {job['status']}", completed=step, info=info)
            if job["status"] in TERMINAL:
                return job
            time.sleep(poll_s)
            job = client.json("GET", path)


def outcome_line(job: dict[str, Any]) -> str:
    """`job job-… succeeded` / `failed (reason: detail)`, then the final metrics."""
    line = f"{job['kind']} {job['id']} {job['status']}"
    if job.get("reason"):
        line += f" ({job['reason']}: {job.get('detail') or ''})".replace(": )", ")")
    final = job.get("final_metrics") or {}
    shown = " ".join(f"{k}={v:.4g}" for k, v in final.items() if isinstance(v, int | float))
    return f"{line}\n{shown}" if shown else line
