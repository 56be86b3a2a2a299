"""`make demo`: the whole path on one machine, through the service as a user would.

1. `numtune up --dev`: a local Ray head, the control plane and serving (all on loopback)
2. POST the demo fine-tune (SmolLM2-135M, arithmetic, Smooth-MMD) over REST
3. follow it with a live progress bar until it succeeds
4. its best checkpoint is registered automatically; point the `production` alias at it
5. ask the served model numbers: answer, parsed value, expected value ± spread, interval
6. `numtune down` (unless --keep)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from jobs.paths import numtune_home
from jobs.spec import load_spec_file
from service import launcher
from service.cli_models import ask, show_predictions
from service.client import Client, ClientError, resolve_token
from service.progress import follow_job, outcome_line
from service.settings import load_settings

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "smollm2-arith-smmd.yaml"
QUESTIONS = ["What is 317 + 24?", "Calculate -58 + 1203.", "What is 4.5 - 12?"]


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", type=Path, default=EXAMPLE)
    parser.add_argument("--steps", type=int, help="override train.steps (a quicker demo)")
    parser.add_argument("--samples", type=int, default=16, help="K samples for the spread")
    parser.add_argument("--keep", action="store_true", help="leave the service running")
    args = parser.parse_args(argv)
    console = Console()
    os.environ.setdefault("NUMTUNE_DEV", "true")
    settings = load_settings()
    home = numtune_home()

    console.rule("1. numtune up")
    state, started = launcher.up(settings)
    console.print(
        f"API {state.api_url}, serving on :{state.serve_port}"
        + ("" if started else " (already running)")
    )
    client = Client(state.api_url, resolve_token(home), timeout_s=60)
    try:
        console.rule("2. submit the fine-tune over REST")
        spec: dict[str, Any] = load_spec_file(args.spec)
        if args.steps:
            spec["train"] = {**spec["train"], "steps": args.steps}
            spec["train"]["eval_every"] = spec["train"]["checkpoint_every"] = args.steps
            spec["train"]["warmup_steps"] = min(
                spec["train"].get("warmup_steps", 0), args.steps // 10
            )
        job = client.json("POST", "/v1/jobs", body=spec)
        console.print(f"{job['id']}: {spec['loss']['name']} on {spec['model']['source']}")

        console.rule("3. training (Ray Train on the local head)")
        job = follow_job(client, f"/v1/jobs/{job['id']}", job, console)
        console.print(outcome_line(job))
        if job["status"] != "succeeded":
            console.print(client.request("GET", f"/v1/jobs/{job['id']}/logs").text[-3000:])
            return 1

        console.rule("4. registered and aliased")
        name = spec.get("register_as") or spec["name"]
        version = wait_for_version(client, name, job["id"])
        client.json("PUT", f"/v1/models/{name}/aliases/production", body={"version": version})
        console.print(f"{name}:{version} is {name}@production")

        console.rule("5. served: numeric answers with the model's own spread")
        reply = ask(f"{name}@production", QUESTIONS, samples=args.samples, interval=0.9)
        show_predictions(reply, QUESTIONS, 0.9)
        return 0
    except ClientError as error:
        console.print(f"[red]demo failed: {error.message}")
        return 1
    finally:
        client.close()
        if not args.keep:
            console.rule("6. numtune down")
            for line in launcher.down(home):
                console.print(line)


if __name__ == "__main__":
    sys.exit(main())
