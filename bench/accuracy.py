"""Do numeric losses help? Every loss trained at equal steps and data, over seeds, vs ce.

    .venv/bin/python bench/accuracy.py --scale small            # the committed table
    .venv/bin/python bench/accuracy.py --scale paper --steps 60 # SmolLM2-135M, shortened

Each run is a numtune job (jobs.runner.build_trainer → the service's train loop, in Ray
Train's local mode inside a Ray task, `--workers` at a time). `smmd_tuned` is Smooth-MMD
with the bandwidth and weight a Ray Tune sweep (jobs.tune.run_tune) found on a validation
split carved from the arithmetic *training* set; its config is then used on every task.
Seeds vary the initial weights and the data order; the data itself (data.seed 0) is the
same for every run, so runs with the same seed are paired. Finished runs are kept in the
storage folder: the same command resumes. Writes bench/results/accuracy-<scale>.{json,md,png}.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shlex
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))  # the accuracy_* helpers, also when loaded by file path

import ray  # noqa: E402
from accuracy_plan import LOSSES, SCALES, TASKS, Plan  # noqa: E402
from accuracy_report import git_commit, machine, markdown, plot, summarise  # noqa: E402
from accuracy_runs import run_one, write_user_jsonl  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn  # noqa: E402

from jobs.paths import numtune_home  # noqa: E402
from jobs.spec import LossSpec  # noqa: E402

log = logging.getLogger("bench.accuracy")


def csv(choices: tuple[str, ...]) -> Any:
    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{bad or text!r}: choose from {', '.join(choices)}")
        return items

    return parse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scale", choices=tuple(SCALES), default="small")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (>= 3 for the table)")
    p.add_argument("--losses", type=csv(LOSSES), default=list(LOSSES))
    p.add_argument("--tasks", type=csv(TASKS), default=list(TASKS), help="main tokenizer's")
    p.add_argument(
        "--tokenizers",
        type=lambda t: [x for x in t.split(",") if x],
        default=None,
        help="small: digit,llama3 (default); paper: smollm2",
    )
    p.add_argument(
        "--study-tasks",
        type=csv(TASKS),
        default=["arithmetic"],
        help="tasks of the tokenizers after the first (tokenizer study)",
    )
    p.add_argument("--steps", type=int, help="steps for every task (default: per scale and task)")
    p.add_argument("--lr", type=float, help="peak learning rate (default: per scale)")
    p.add_argument("--eval-size", type=int, help="held-out questions per task and split")
    p.add_argument("--train-size", type=int, help="training examples per task")
    p.add_argument("--workers", type=int, help="runs at a time (each on --threads cores)")
    p.add_argument("--threads", type=int, help="torch threads per run")
    p.add_argument("--tune-samples", type=int, default=4, help="trials of the smmd sweep")
    p.add_argument("--tune-steps", type=int, help="steps per trial (default: arithmetic's)")
    p.add_argument("--tune-val-size", type=int, default=64)
    p.add_argument("--tune-metric", choices=("ce", "mae", "exact_match"), default="ce")
    p.add_argument("--out", type=Path, default=BENCH / "results")
    p.add_argument("--storage", type=Path, help="run folders (default: NUMTUNE_HOME/bench/...)")
    p.add_argument("--render", type=Path, help="only rewrite tables and plot from this JSON")
    args = p.parse_args(argv)
    scale = SCALES[args.scale]
    args.tokenizers = args.tokenizers or list(scale.models)
    unknown = [t for t in args.tokenizers if t not in scale.models]
    if unknown:
        p.error(f"--tokenizers {unknown}: scale {args.scale} has {', '.join(scale.models)}")
    if args.render is not None and not args.render.is_file():
        p.error(f"--render {args.render}: no such file")
    if args.lr is not None and not 0 < args.lr < 1:
        p.error("--lr must be between 0 and 1")
    for flag in ("seeds", "steps", "eval_size", "train_size", "workers", "threads"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be at least 1")
    return args


def start_ray(plan: Plan) -> None:
    with socket.socket() as s:  # a free port for the dashboard (never 8265)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        "OMP_NUM_THREADS": str(plan.threads),
        "PYTHONPATH": os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")]),
        "NUMTUNE_HOME": str(numtune_home()),
        "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2",  # FACTS: else ~2 s per report
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
    }
    ray.init(
        address="local",
        # Logical CPUs above the cores the runs use leave room for Ray Train's controllers.
        num_cpus=plan.workers * plan.threads + 2,
        include_dashboard=True,
        dashboard_host="127.0.0.1",
        dashboard_port=port,
        runtime_env={"env_vars": env},
        log_to_driver=False,
    )


def run_all(plan: Plan, console: Console) -> dict[str, Any]:
    args = plan.args
    tuned: dict[str, Any] = {}
    if any(t == "jsonl" for _, t in plan.cells()):
        write_user_jsonl(plan.user_jsonl, (args.train_size or plan.scale.train_size) + 200)
    tokenizers = sorted({tok for tok, _ in plan.cells()}, key=args.tokenizers.index)
    if "smmd_tuned" in args.losses:
        for tok in tokenizers:
            console.rule(f"Ray Tune sweep of smmd ({tok})")
            tuned[tok] = plan.tune(tok)
            console.print(f"smmd_tuned ({tok}): {tuned[tok]}")
    todo = []  # seed-major: a cut-short run still has whole seeds
    for seed in range(args.seeds):
        for tok, task in plan.cells():
            for name in args.losses:
                loss = (
                    LossSpec(name="smmd", **tuned[tok]["config"])
                    if name == "smmd_tuned"
                    else LossSpec(name=name)  # LossSpec defaults = the papers' defaults
                )
                spec = plan.job(tok, task, loss, seed)
                digest = hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:8]
                key = {"tokenizer": tok, "task": task, "loss": name, "seed": seed}
                todo.append((key, spec, f"{tok}-{task}-{name}-s{seed}-{digest}"))
    remote = ray.remote(num_cpus=plan.threads, max_retries=0)(run_one)
    runs: list[dict[str, Any]] = []
    pending = list(todo)
    in_flight: dict[Any, tuple[dict[str, Any], str]] = {}
    columns = (*Progress.get_default_columns()[:2], BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("runs", total=len(todo))
        while pending or in_flight:
            while pending and len(in_flight) < plan.workers:
                key, spec, job_id = pending.pop(0)
                done_file = plan.storage / "runs" / job_id / "bench-result.json"
                if done_file.exists():  # finished by an earlier invocation: resume
                    runs.append({**key, **json.loads(done_file.read_text())})
                    progress.advance(bar)
                    continue
                extra = ["extrapolate"] if key["task"] == "arithmetic" else []
                ref = remote.remote(spec.model_dump_json(), job_id, str(plan.storage), extra)
                in_flight[ref] = (key, job_id)
            if not in_flight:
                continue
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            key, job_id = in_flight.pop(ready[0])
            try:
                out = ray.get(ready[0])
            except ray.exceptions.RayTaskError as error:
                raise RuntimeError(f"run {job_id} failed (files: {plan.storage}/runs)") from error
            runs.append({**key, **out})
            scores = out["metrics"]["interpolate"]
            progress.console.print(
                f"{job_id}: EM {scores['exact_match']:.3f} MAE {scores['mae']:.4g} "
                f"rel {scores['median_rel_error']:.3g} ({out['wall_s']:.0f} s)"
            )
            progress.advance(bar)
    return {"runs": runs, "tuned": tuned}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    if args.render is not None:
        return render(args.render, args.out)
    console = Console()
    storage = args.storage or numtune_home() / "bench" / f"accuracy-{args.scale}"
    plan = Plan(args, storage.resolve())
    started = time.perf_counter()
    start_ray(plan)
    try:
        done = run_all(plan, console)
    finally:
        ray.shutdown()
    s = plan.scale
    steps = ", ".join(f"{t} {plan.steps(t)}" for t in dict.fromkeys(t for _, t in plan.cells()))
    result = {
        "scale": args.scale,
        "command": shlex.join(["python", "bench/accuracy.py", *(argv or sys.argv[1:])]),
        "commit": git_commit(BENCH.parent),
        "machine": machine(),
        "finished": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_s": time.perf_counter() - started,
        "settings": {
            "steps": {t: plan.steps(t) for _, t in plan.cells()},
            "seeds": args.seeds,
            "batch_size": s.batch_size,
            "lr": plan.lr,
            "warmup": s.warmup,
            "train_size": args.train_size or s.train_size,
            "eval_size": args.eval_size or s.eval_size,
            "threads": plan.threads,
            "workers": plan.workers,
            "models": s.models,
        },
        "settings_text": (
            f"steps ({steps}) of batch {s.batch_size}, AdamW lr {plan.lr} cosine, warm-up "
            f"{s.warmup}; {args.train_size or s.train_size} training examples, "
            f"{args.eval_size or s.eval_size} held-out per split; seeds 0-{args.seeds - 1}; "
            f"models {', '.join(f'{k}={v}' for k, v in s.models.items())}"
        ),
        "tuned": done["tuned"],
        "runs": done["runs"],
        "summary": summarise(done["runs"], LOSSES),
    }
    write_outputs(result, args.out, console)
    return 0


def write_outputs(result: dict[str, Any], out: Path, console: Console) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"accuracy-{result['scale']}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    stem.with_suffix(".md").write_text(markdown(result))
    plot(result, stem.with_suffix(".png"))
    console.print(markdown(result))
    console.print(f"wrote {stem}.json, .md and .png")


def render(saved: Path, out: Path) -> int:
    """Tables and plot again from a saved result's runs (no training): same figures."""
    result = json.loads(saved.read_text())
    result["summary"] = summarise(result["runs"], LOSSES)
    result["rendered_by"] = git_commit(BENCH.parent)
    write_outputs(result, out, Console())
    return 0


if __name__ == "__main__":
    sys.exit(main())
