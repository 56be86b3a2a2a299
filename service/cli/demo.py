"""`make demo`: what numtune is for, on one machine, through the service as a user would.

1. `numtune up --dev`: a local Ray head, the control plane and serving (all on loopback)
2. before: the untrained model answers the held-out questions (scored here, same code)
3. POST two jobs over REST, the same spec but for the loss: a numeric loss and `ce`;
   follow each with a live progress bar while the queue runs them
4. each best checkpoint is registered; `production` points at the numeric-loss version
5. the table: untrained vs `ce` vs the numeric loss, on the same held-out questions
6. ask both served versions a few of those questions: answer, expected value ± spread,
   interval, next to the true answer
7. where to look next, then `numtune down` (unless --keep)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from jobs.spec import JobSpec, load_spec_file
from jobs.storage.paths import numtune_home
from service.cli import launcher
from service.cli.client import Client, ClientError, resolve_token
from service.cli.demo_report import answers_table, metrics_table, next_steps, untrained_metrics
from service.cli.progress import follow_job, outcome_line
from service.settings import load_settings

# Relative to where `make demo` runs, the checkout's root: the CLI package reaches nothing
# outside itself, and an installed `numtune` names its spec with --spec.
EXAMPLE = Path("examples", "demo-units.yaml")
SECONDS_PER_STEP = 0.09  # the example's model, batch 64, one core (evaluations included)


def demo_specs(path: Path, steps: int | None, eval_size: int | None) -> list[dict[str, Any]]:
    """The example's job and its `ce` twin (same model, data, schedule and seed)."""
    spec: dict[str, Any] = load_spec_file(path)
    if steps:
        every = max(1, steps // 2)
        spec["train"] = {**spec["train"], "steps": steps, "eval_every": every}
        spec["train"].update(checkpoint_every=every, warmup_steps=min(10, steps - 1))
    if eval_size:
        spec["data"] = {**spec["data"], "eval_size": eval_size}
    JobSpec.model_validate(spec)  # a bad example fails here, before anything starts
    if spec["loss"]["name"] == "ce":
        return [spec]
    name = spec["name"].removesuffix(f"-{spec['loss']['name']}") + "-ce"
    twin = {**spec, "name": name, "register_as": name, "loss": {"name": "ce"}}
    return [spec, twin]


def wait_for_version(client: Client, name: str, job_id: str, timeout_s: float = 300) -> int:
    """The registry version made from `job_id` (registration follows success within a pass)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            model = client.json("GET", f"/v1/models/{name}")
        except ClientError:
            model = {"versions": []}
        mine = [v["version"] for v in model["versions"] if v["job_id"] == job_id]
        if mine:
            return int(mine[-1])
        time.sleep(2)
    raise ClientError(f"job {job_id} succeeded but no version of {name!r} appeared")


def train_all(client: Client, specs: list[dict[str, Any]], console: Console) -> list[dict]:
    """Submit every spec (the queue runs them as CPUs free up); follow each to its end."""
    jobs = [client.json("POST", "/v1/jobs", body=spec) for spec in specs]
    for job, spec in zip(jobs, specs, strict=True):
        console.print(f"{job['id']}: {spec['loss']['name']} on {spec['model']['source']}")
    done = []
    for job in jobs:
        console.rule(f"training {job['id']} (Ray Train on the local head)")
        job = follow_job(client, f"/v1/jobs/{job['id']}", job, console)
        console.print(outcome_line(job))
        if job["status"] != "succeeded":
            console.print(client.request("GET", f"/v1/jobs/{job['id']}/logs").text[-3000:])
            raise ClientError(f"job {job['id']} {job['status']}")
        done.append(job)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", type=Path, default=EXAMPLE)
    parser.add_argument("--steps", type=int, help="override train.steps (a quicker demo)")
    parser.add_argument("--eval-size", type=int, help="override data.eval_size")
    parser.add_argument("--samples", type=int, default=16, help="K samples for the spread")
    parser.add_argument("--keep", action="store_true", help="leave the service running")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.eval_size is not None and args.eval_size < 1:
        parser.error("--eval-size must be at least 1")
    console = Console()
    try:
        specs = demo_specs(args.spec, args.steps, args.eval_size)
    except (OSError, ValueError) as error:  # unreadable file, bad YAML, or a field pydantic refuses
        parser.error(f"--spec {args.spec}: {error}")
    steps = sum(s["train"]["steps"] for s in specs)
    minutes = 2.5 + steps * SECONDS_PER_STEP / 60  # start, serving and stop: ~2.5 min
    console.print(f"{len(specs)} jobs of {specs[0]['train']['steps']} steps: about "
                  f"{minutes:.0f} min on 2 idle cores")  # fmt: skip
    os.environ.setdefault("NUMTUNE_DEV", "true")
    settings = load_settings()
    home = numtune_home()
    started = time.monotonic()

    console.rule("1. numtune up")
    state, fresh = launcher.up(settings)
    console.print(
        f"API {state.api_url}, serving on :{state.serve_port}"
        + ("" if fresh else " (already running)")
    )
    client = Client(state.api_url, resolve_token(home), timeout_s=60)
    try:
        console.rule("2. before: the untrained model on the held-out questions")
        spec = JobSpec.model_validate(specs[0])
        before, examples = untrained_metrics(spec)
        console.print(f"exact match {before['exact_match']:.1%} on {len(examples)} questions")

        console.rule("3. train: the same spec with each loss, through the queue")
        jobs = train_all(client, specs, console)

        console.rule("4. registered; production = the numeric-loss version")
        refs = []
        for job, one in zip(jobs, specs, strict=True):
            name = one.get("register_as") or one["name"]
            refs.append(f"{name}:{wait_for_version(client, name, job['id'])}")
        name, version = refs[0].split(":")
        client.json("PUT", f"/v1/models/{name}/aliases/production", body={"version": version})
        console.print(f"{', '.join(refs)}; {refs[0]} is {name}@production")

        console.rule("5. before and after, on the same held-out questions")
        labels = [f"{s['loss']['name']} ({r})" for s, r in zip(specs, refs, strict=True)]
        console.print(metrics_table(before, jobs, labels))
        console.print("One seed each: an anecdote, not evidence. The README's accuracy study "
                      "repeats this over 5 seeds with paired tests.")  # fmt: skip

        console.rule("6. served: answers with the model's own spread")
        console.print(answers_table(refs, examples[:5], args.samples))
        console.rule("7. next")
        console.print(next_steps(name, state.api_url), highlight=False)
        console.print(f"demo took {(time.monotonic() - started) / 60:.1f} min")
        return 0
    except ClientError as error:
        console.print(f"[red]demo failed: {error.message}")
        return 1
    finally:
        client.close()
        if not args.keep:
            console.rule("numtune down")
            for line in launcher.down(home):
                console.print(line)


if __name__ == "__main__":
    sys.exit(main())
