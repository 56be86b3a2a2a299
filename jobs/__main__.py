"""`python -m jobs run SPEC` — the entry point a Ray job runs (and a person can, too).
`python -m jobs merge ADAPTER_DIR OUT_DIR` exports an adapter merged into its base.

Exit codes: 0 succeeded; 1 the run failed (reason in result.json); 2 the command line or
the spec is invalid (nothing ran; with a --job-id/--tune-id, result.json says
`invalid_spec`), or a sweep cannot fit even one trial on the cluster (nothing ran;
result.json says `does_not_fit`). A run that fails outside training (its tracking, its
storage) still writes result.json, with the code of what it raised.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import sys
import threading
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from jobs.modeling.folders import ModelUnavailableError
from jobs.modeling.model import export_merged
from jobs.records.models import FailureCode, RunResult, TuneResult
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec, TuneSpec, load_spec_file
from jobs.train.failures import described, failure_code
from jobs.train.runner import run_job
from jobs.tune.sweep import SweepDoesNotFitError, run_tune

SpecT = TypeVar("SpecT", JobSpec, TuneSpec)
log = logging.getLogger("jobs")


def default_job_id(spec: JobSpec | TuneSpec) -> str:
    """Deterministic id for a spec run by hand: the same spec resumes the same run."""
    digest = hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:10]
    return f"{spec.name}-{digest}"


def format_validation_error(error: ValidationError) -> str:
    lines = []
    for e in error.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(spec)"
        lines.append(f"  {where}: {e['msg']}")
    return "invalid spec:\n" + "\n".join(lines)


def read_spec(model: type[SpecT], path: str) -> SpecT | str:
    """The validated spec, or what is wrong with it (which field or file), told to stderr."""
    try:
        return model.model_validate(load_spec_file(path))
    except ValidationError as error:
        problem = format_validation_error(error)
    except (OSError, ValueError) as error:
        problem = f"invalid spec file {path}: {error}"
    print(problem, file=sys.stderr)
    return problem


def record_failure(
    model: type[RunResult], run_id: str | None, storage: str | None, code: FailureCode, detail: str
) -> None:
    """result.json for a run that failed before or after its training, where the driver can
    write one (it needs the run's id); the control plane reads the code from it."""
    if run_id is None:
        return
    try:
        RunFiles.for_job(run_id, storage).write_result(model.failed(code, detail[:4000]))
    except (OSError, ValueError):  # nothing to record it in: the Ray job's status says failed
        log.exception("could not write the result of %s", run_id)


def show_progress(files_root: str, job_id: str, steps: int | None, done: threading.Event) -> None:
    """A live bar from metrics.jsonl while the run goes (terminal only)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    files = RunFiles.for_job(job_id, files_root or None)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
    ) as bar:
        task = bar.add_task(job_id, total=steps, info="starting Ray Train")
        while not done.wait(1.0):
            rows = files.read_metrics()
            if not rows:
                continue
            row = rows[-1].as_dict()
            info = " ".join(
                f"{k}={row[k]:.4g}" for k in ("loss", "ce", "eval_exact_match") if k in row
            )
            bar.update(task, completed=rows[-1].step, info=info)


def run_with_progress(spec: JobSpec, job_id: str, storage: str | None) -> RunResult:
    """Run the job; in a terminal, with a live bar fed by its metrics.jsonl."""
    done = threading.Event()
    if sys.stdout.isatty():
        threading.Thread(
            target=show_progress, args=(storage or "", job_id, spec.train.steps, done), daemon=True
        ).start()
    try:
        return run_job(spec, job_id, storage)
    finally:
        done.set()


def cmd_run(args: argparse.Namespace) -> int:
    spec = read_spec(JobSpec, args.spec)
    if isinstance(spec, str):
        record_failure(RunResult, args.job_id, args.storage, FailureCode.INVALID_SPEC, spec)
        return 2
    job_id = args.job_id or default_job_id(spec)
    try:
        result = run_with_progress(spec, job_id, args.storage)
    except Exception as error:  # outside the training run_job catches (tracking, storage)
        log.exception("job %s failed", job_id)
        record_failure(RunResult, job_id, args.storage, failure_code(error), described(error))
        return 1
    print(f"job {job_id}: {result.status}", end="")
    print(f" ({result.reason}: {result.detail})" if result.reason else "")
    if result.best_checkpoint:
        print(f"best checkpoint: {result.best_checkpoint}")
    # Paused on request is a clean end too: its Ray job succeeds, result.json says paused.
    return 0 if result.status in ("succeeded", "paused") else 1


def cmd_tune(args: argparse.Namespace) -> int:
    spec = read_spec(TuneSpec, args.spec)
    if isinstance(spec, str):
        record_failure(TuneResult, args.tune_id, args.storage, FailureCode.INVALID_SPEC, spec)
        return 2
    tune_id = args.tune_id or default_job_id(spec)
    try:
        result = run_tune(spec, tune_id, args.storage)
    except SweepDoesNotFitError as error:  # run_tune wrote its does_not_fit result
        print(f"sweep {tune_id} cannot run: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # Tune itself failed: the sweep's trials record their own
        log.exception("sweep %s failed", tune_id)
        record_failure(TuneResult, tune_id, args.storage, failure_code(error), described(error))
        return 1
    print(f"sweep {tune_id}: {result.status}, {result.trials} trials")
    if result.best_checkpoint:
        print(f"best trial {result.best_trial} {result.best_config}: {result.metrics}")
        print(f"best checkpoint: {result.best_checkpoint}")
    # Paused on request is a clean end, as for a job: the same sweep run again resumes it.
    return 0 if result.status in ("succeeded", "paused") else 1


def cmd_merge(args: argparse.Namespace) -> int:
    """An adapter checkpoint or version folder as a full model folder (its base verified)."""
    try:
        out = export_merged(Path(args.adapter), Path(args.out))
    except ModelUnavailableError as error:  # no adapter there, its base gone or changed
        print(f"cannot merge {args.adapter}: {error}", file=sys.stderr)
        return 2
    print(f"merged model: {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(prog="numtune", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a training job spec (YAML or JSON)")
    run.add_argument("spec", help="path to the JobSpec file")
    run.add_argument("--job-id", help="run id (default: name + spec hash)")
    run.add_argument("--storage", help="storage root (default: NUMTUNE_STORAGE or ~/.numtune)")
    run.set_defaults(func=cmd_run)
    sweep = sub.add_parser("tune", help="run (or resume) a Ray Tune sweep spec")
    sweep.add_argument("spec", help="path to the TuneSpec file")
    sweep.add_argument("--tune-id", help="sweep id (default: name + spec hash)")
    sweep.add_argument("--storage", help="storage root (default: NUMTUNE_STORAGE or ~/.numtune)")
    sweep.set_defaults(func=cmd_tune)
    merge = sub.add_parser("merge", help="export a LoRA adapter merged into its base")
    merge.add_argument("adapter", help="an adapter checkpoint or registry version folder")
    merge.add_argument("out", help="the full model folder to write (safetensors)")
    merge.set_defaults(func=cmd_merge)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
