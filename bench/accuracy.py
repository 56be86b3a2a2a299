"""Do numeric losses help? Every loss trained at equal steps and data, over seeds, vs ce.

    .venv/bin/python bench/accuracy.py --part add            # one part (< 1 h on 2 cores)
    .venv/bin/python bench/accuracy.py --part all            # every part, one after another
    .venv/bin/python bench/accuracy.py --render bench/results/accuracy-small.json

The small scale trains a 2-layer, 64-wide Llama with a character tokenizer (99 symbols:
the LM head stops dominating the step) from scratch on integer tasks with bounded answers,
thousands of steps per run, so `ce` itself learns and a loss can help or hurt. Parts:
`add`, `listsum`, `units` (the main cells), `multidigit` (LLaMA-3-style 1-3 digit number
tokens, before/after the scale-aware distance fix), `lambda` (weight sensitivity), the hard
rows `arithmetic` (DeepMind add_or_sub) and `clock` (clock times), `smollm2` (the bundled
SmolLM2-135M fine-tuned), `image` (bar values read from pictures by the tiny Llava).

Each run is a numtune job (jobs.train.runner.build_trainer → the service's train loop, in Ray
Train's local mode inside a Ray task, two at a time). `smmd_tuned` is Smooth-MMD with the
bandwidth and weight a Ray Tune sweep (jobs.tune.sweep.run_tune) found on a validation split
carved from the cell's *training* set. Seeds vary the initial weights and the data order;
the data itself (data.seed 0) is the same for every run, so runs with the same seed are
paired. Finished runs are kept in the storage folder: the same command resumes. Results
of every part accumulate in bench/results/accuracy-<scale>.{json,md,png} (plus the
learning curves and λ sensitivity PNGs).

`--scale pretrained` follows bench/protocol.md (SmolLM2-135M fine-tuned, parts
`smollm2-units`, `smollm2-jsonl`): ce's learning rate is swept first and every arm trains at
it; each finished run (with its per-question predictions and provenance) and each sweep is
written at once to bench/results/pretrained-runs/, which later invocations count as done.
Its cells are study specs (bench/studies/<part>.yaml, `numtune study run` runs them through
the service): its runs, arms, seeds and sweep spaces are read from them
(bench/accuracy_studies.py). The other way round, bench/study_records.py keeps the runs of a
study the service ran as such records, which the same report reads.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import shlex
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))  # the accuracy_* helpers, also when loaded by file path
if __name__ == "__main__":  # not when a test imports this module: its own Ray is not ours
    # Both are read when Ray is imported. The study's head (bench/local_head.py) is on
    # loopback ("0" keeps this driver's 127.0.0.1 from being swapped for the machine's
    # address) and requires Ray's token (its path is set once the head has written it).
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "token")

import ray  # noqa: E402
from accuracy_output import merged, render, write_outputs  # noqa: E402
from accuracy_plan import LOSSES, PARTS, SCALES, Plan, Todo  # noqa: E402
from accuracy_report import machine, summarise  # noqa: E402
from accuracy_runs import StudyError, run_one, write_user_jsonl  # noqa: E402
from accuracy_sweeps import run_digest  # noqa: E402
from local_head import local_head  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn  # noqa: E402

from jobs.data import load_task  # noqa: E402
from jobs.records.provenance import git_commit  # noqa: E402
from jobs.spec import JobSpec  # noqa: E402
from jobs.storage.paths import numtune_home  # noqa: E402

log = logging.getLogger("bench.accuracy")
# Seconds per 1,000 training steps of one run on 2 idle cores (one thread each, two at a
# time), evaluations included, for the estimate printed before a part starts.
KSTEP_S = {"char": 100, "char3": 110, "llama3": 750, "smollm2": 5000, "vlm": 130}
SPLITS_EXTRA = ("add", "listsum", "units", "mul", "arithmetic")  # have an extrapolate set
PLAIN_GREEDY_TOO = ("char3", "llama3")  # multi-digit number tokens: scored both ways


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
    p.add_argument("--part", help="comma-separated parts, or 'all' (default: all)")
    p.add_argument("--seeds", type=int, help="seeds 0..N-1 (default: the part's, >= 5)")
    p.add_argument("--losses", type=csv(LOSSES), help="only these losses (default: the part's)")
    p.add_argument("--steps", type=int, help="steps for every run (default: per model and task)")
    p.add_argument("--lr", type=float, help="peak learning rate (default: per model)")
    p.add_argument("--eval-size", type=int, help="held-out questions per split")
    p.add_argument("--train-size", type=int, help="training examples per task")
    p.add_argument("--workers", type=int, help="runs at a time (default: cores / threads per run)")
    p.add_argument(
        "--tune-samples", type=int, help="trials of each sweep (default: the study spec's, or 6)"
    )
    p.add_argument("--tune-steps", type=int, help="steps per trial (default: the cell's)")
    p.add_argument("--tune-val-size", type=int, default=300)
    p.add_argument("--tune-metric", choices=("ce", "mae", "exact_match"), default="exact_match")
    p.add_argument("--out", type=Path, default=BENCH / "results")
    p.add_argument("--storage", type=Path, help="run folders (default: NUMTUNE_HOME/bench/...)")
    p.add_argument("--render", type=Path, help="only rewrite tables and plots from this JSON")
    p.add_argument(
        "--records",
        type=Path,
        help="keep each finished run and sweep here as JSON, and count those as done "
        "(default for --scale pretrained: bench/results/pretrained-runs)",
    )
    args = p.parse_args(argv)
    parts = PARTS[args.scale]
    args.part = list(parts) if args.part in (None, "all") else args.part.split(",")
    unknown = [x for x in args.part if x not in parts]
    if unknown:
        p.error(f"--part {unknown}: scale {args.scale} has {', '.join(parts)} (or all)")
    if args.records is None and args.scale == "pretrained":
        args.records = BENCH / "results" / "pretrained-runs"
    if args.render is not None and not args.render.is_file():
        p.error(f"--render {args.render}: no such file")
    if args.lr is not None and not 0 < args.lr < 1:
        p.error("--lr must be between 0 and 1")
    for flag in ("seeds", "steps", "eval_size", "train_size", "workers", "tune_samples"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be at least 1")
    return args


@contextlib.contextmanager
def study_ray(plan: Plan) -> Iterator[None]:
    """The study's own Ray head (loopback, free ports), for as long as the context lasts."""
    env = {
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")]),
        "NUMTUNE_HOME": str(numtune_home()),
        # Ray Train's report otherwise blocks ~2 s per call after the first few.
        "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2",
        # A sweep trial's worker group waits for its CPUs: on a loaded machine Ray Train's
        # 60 s default failed a SmolLM2 trial that only had to wait for the one before it.
        "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "900",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
    }
    threads = max(m.threads for m in plan.models.values())
    # Logical CPUs above the cores the runs use leave room for Ray Train's controllers,
    # and for the worker placement groups that trials ASHA stopped can leave reserved: a
    # 2-thread SmolLM2 sweep on 4 logical CPUs waited 20 min for its 5th trial's workers
    # with no process running. max_concurrent_trials still bounds what runs at once.
    trials = max(
        plan.tune_samples(label, task) for part in plan.parts for label, task in part.cells
    )
    cpus = max(plan.workers, threads) + 2 + threads * trials
    with local_head(cpus, env, log_to_driver=False):
        yield


def run_id(label: str, task: str, loss_label: str, seed: int, digest: str) -> str:
    """`char-add-emd_weight-0.1-s0-1a2b3c4d`: a run folder name (letters, digits, . _ -)."""
    loss = loss_label.replace("[", "_").replace("]", "").replace("=", "-")
    return f"{label}-{task}-{loss}-s{seed}-{digest}"


def plan_runs(plan: Plan, console: Console) -> tuple[list[Todo], dict[str, Any]]:
    """Every run of the asked parts (seed-major: a cut-short run still has whole seeds)."""
    tuned: dict[str, Any] = {}  # per cell "model/task": each cell's own validation sweep
    lrs: dict[str, Any] = {}  # per cell: ce's swept learning rate, where the model asks
    todo: list[Todo] = []
    for name, part in zip(plan.args.part, plan.parts, strict=True):
        for label, task in part.cells:
            cell = f"{label}/{task}"
            if plan.model(label).tune_lr and cell not in lrs:
                console.rule(f"Ray Tune sweep of ce's learning rate ({cell})")
                lrs[cell] = plan.tune_lr(label, task)
                console.print(f"ce's learning rate ({cell}): {lrs[cell]}")
                check_eligible(cell, lrs[cell])
            lr = lrs[cell]["config"]["lr"] if cell in lrs else None
            if any("smmd_tuned" in x for x in plan.losses(part)) and cell not in tuned:
                console.rule(f"Ray Tune sweep of smmd ({cell})")
                tuned[cell] = plan.tune(label, task, lr)
                console.print(f"smmd_tuned ({cell}): {tuned[cell]}")
        for seed in range(plan.seeds(part)):
            for label, task in part.cells:
                lr = lrs[f"{label}/{task}"]["config"]["lr"] if f"{label}/{task}" in lrs else None
                for loss_label in plan.losses(part):
                    loss = plan.loss(loss_label, tuned.get(f"{label}/{task}"), label, task)
                    spec = plan.job(label, task, loss, seed, lr)
                    digest = run_digest(spec)
                    key = {"part": name, "model": label, "task": task, "loss": loss_label,
                           "seed": seed}  # fmt: skip
                    extra = ["extrapolate"] if task in SPLITS_EXTRA else []
                    if label in PLAIN_GREEDY_TOO:
                        extra += [f"{split}@greedy" for split in ("interpolate", *extra)]
                    run = run_id(label, task, loss_label, seed, digest)
                    todo.append(Todo(key, spec, run, extra))
    return todo, {**tuned, **{f"{cell} lr": found for cell, found in lrs.items()}}


def check_eligible(cell: str, swept: dict[str, Any]) -> None:
    """bench/protocol.md keeps a task only if ce, at its swept learning rate, scores between
    0.05 and 0.90 validation exact match: room to help and room to hurt."""
    score = swept["metrics"].get("eval_exact_match")
    if score is None or not 0.05 <= score <= 0.90:
        raise StudyError(
            f"{cell}: ce's validation exact match at its swept learning rate is {score}, "
            "outside [0.05, 0.90]: by bench/protocol.md this task is replaced by the next "
            "fallback part (--part smollm2-listsum, then smollm2-add)"
        )


def finished_file(plan: Plan, job_id: str) -> Path:
    """Where a finished run's result is: its record in the repository, else its run folder."""
    if plan.records is not None and (plan.records / f"{job_id}.json").exists():
        return plan.records / f"{job_id}.json"
    return plan.storage / "runs" / job_id / "bench-result.json"


def provenance(spec: JobSpec) -> dict[str, Any]:
    """What a kept run record adds to the run's own result: its exact spec and the sha256 of
    the examples it read (train then held-out rows as JSON lines; generated tasks have no
    file to hash)."""
    task = load_task(spec.data)
    rows = "".join(json.dumps(ex.as_row()) + "\n" for ex in (*task.train, *task.eval))
    return {
        "spec": spec.model_dump(mode="json"),
        "data_sha256": hashlib.sha256(rows.encode()).hexdigest(),
    }


def kept_record(item: Todo, out: dict[str, Any]) -> dict[str, Any]:
    """A finished run as the records folder keeps it: its key, job id, spec, data hash and
    its result (`run_one`'s)."""
    return {**item.key, "job_id": item.job_id, **provenance(item.spec), **out}


def run_all(plan: Plan, console: Console) -> dict[str, Any]:
    if any(task == "jsonl" for part in plan.parts for _, task in part.cells):
        write_user_jsonl(plan.user_jsonl, 5000)
    todo, tuned = plan_runs(plan, console)
    done_files = {t.job_id: finished_file(plan, t.job_id) for t in todo}
    left = [t for t in todo if not done_files[t.job_id].exists()]
    run_s = [KSTEP_S.get(t.key["model"], 150) * (t.spec.train.steps or 0) / 1000 for t in left]
    estimate = sum(run_s) / plan.workers / 60
    console.print(
        f"{len(todo)} runs, {len(todo) - len(left)} done earlier; about {estimate:.0f} min "
        f"on 2 idle cores for the {len(left)} left"
    )
    remote = ray.remote(max_retries=0)(run_one)
    runs: list[dict[str, Any]] = []
    pending = list(todo)
    in_flight: dict[Any, Todo] = {}
    columns = (*Progress.get_default_columns()[:2], BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("runs", total=len(todo))
        while pending or in_flight:
            while pending and len(in_flight) < plan.workers:
                item = pending.pop(0)
                if done_files[item.job_id].exists():  # finished by an earlier invocation
                    runs.append({**item.key, **json.loads(done_files[item.job_id].read_text())})
                    progress.advance(bar)
                    continue
                cpus = plan.model(item.key["model"]).threads
                ref = remote.options(num_cpus=cpus).remote(
                    item.spec.model_dump_json(),
                    item.job_id,
                    str(plan.storage),
                    item.extra_splits,
                    plan.calibrate,
                )
                in_flight[ref] = item
            if not in_flight:
                continue
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            item = in_flight.pop(ready[0])
            try:
                out = ray.get(ready[0])
            except ray.exceptions.RayTaskError as error:
                raise RuntimeError(f"run {item.job_id} failed ({plan.storage}/runs)") from error
            runs.append({**item.key, **out})
            if plan.records is not None:  # kept at once: a stopped study loses no finished run
                plan.records.mkdir(parents=True, exist_ok=True)
                record = kept_record(item, out)
                (plan.records / f"{item.job_id}.json").write_text(json.dumps(record, indent=1))
            scores = out["metrics"][item.spec.data.eval_split]
            progress.console.print(
                f"{item.job_id}: EM {scores['exact_match']:.3f} MAE {scores['mae']:.4g} "
                f"parse fail {scores['parse_failure_rate']:.2f} ({out['wall_s']:.0f} s)"
            )
            progress.advance(bar)
    return {"runs": runs, "tuned": tuned, "resumed": len(todo) - len(left)}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    if args.render is not None:
        return render(args.render, args.out)
    console = Console()
    storage = args.storage or numtune_home() / "bench" / f"accuracy-{args.scale}"
    plan = Plan(args, storage.resolve())
    commit = git_commit(BENCH.parent)  # the code that trains, not what HEAD is at the end
    started = time.perf_counter()
    try:
        with study_ray(plan):
            done = run_all(plan, console)
    except StudyError as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    wall = time.perf_counter() - started
    fresh = {
        "scale": args.scale,
        "command": shlex.join(["python", "bench/accuracy.py", *(argv or sys.argv[1:])]),
        "commit": commit,
        "machine": machine(),
        "finished": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "parts": args.part,
        "invocations": [{"parts": args.part, "wall_s": wall, "resumed": done["resumed"]}],
        "settings": {
            "models": {k: vars(m) for k, m in plan.models.items()},
            "parts": {k: vars(PARTS[args.scale][k]) for k in args.part},
        },
        "tuned": done["tuned"],
        "runs": done["runs"],
    }
    out = args.out / f"accuracy-{args.scale}.json"
    result = merged(out, fresh)
    result["summary"] = summarise(result["runs"], result["scale"])
    write_outputs(result, args.out, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
