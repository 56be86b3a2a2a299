"""A study the service ran, kept as the bench's run records: the bench's tables and README
rows from what `numtune study` produced, not from a runner of the bench's own.

    numtune up
    .venv/bin/python bench/study_records.py --spec bench/studies/smollm2-units.yaml \\
        --records bench/results/smollm2-units-service      # post it, follow it, keep its runs
    .venv/bin/python bench/study_records.py --study study-… --records DIR   # one that ran

`--spec` posts a StudySpec file to POST /v1/studies (with `--questions N`, the bench's
generated word problems are uploaded first and named as the base's data file: the JSONL
cell) and follows it to its end. Then every run that succeeded becomes the record
`accuracy.py --scale pretrained` keeps for a run of its own, and every sweep the record of
its best trial. A record holds the same fields, read over REST: key (part, model, task,
loss, seed), job id, spec, provenance (commit, data files' sha256, decoding), final
held-out metrics, per-question answers, learning curve, mean step time and wall time.
`accuracy_report.summarise` and `readme_pretrained` read them as they read the bench's,
so a table rendered from them is the service's runs, compared by the same jobs.stats code
the service's result uses (tests/e2e/test_study_e2e.py checks they agree).

A folder holds one run per (part, loss, seed): records of another study for a run already
kept there are refused, never mixed in (the bench's kept runs stand, as bench/protocol.md
says: a run is never repeated only to move it between code paths).

`--kept DIR` carries a study across services (a study longer than the machine it runs on
lives): with `--spec`, the study is posted to POST /v1/studies/resume with the pieces
kept in DIR (service/studies/kept.py), so that what finished elsewhere is taken over and
not trained again; after it (or with `--study … --partial`, as it stands), every sweep and
run of it that succeeded is written to DIR, one file each (`tune-<arm>.json`,
`job-<arm>-s<seed>.json`). A run taken over is not kept again as a record: its record was
kept where it ran.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# `python bench/study_records.py` (protocol 2's command line) puts bench/ first on the
# import path; the checkout is where `bench` is a package (`python -m bench.x` needs none).
if __name__ == "__main__" and not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.accuracy_records import CURVE, run_id
from bench.accuracy_studies import bench_label
from bench.readme_pretrained import load_runs
from bench.user_questions import write_user_jsonl
from jobs.spec import BASELINE, JobSpec, StudySpec, TuneSpec, load_spec_file
from jobs.storage.paths import numtune_home
from jobs.tune.report import best_row
from service.cli.client import Client, ClientError, resolve_token, resolve_url
from service.cli.studies import follow, render

Run = dict[str, Any]


def loss_label(spec: StudySpec, label: str) -> str:
    """The bench's name for a study arm (`smmd_tuned`, `del[weight=1]`); an arm with several
    knobs off its defaults keeps the study's label, in the bench's label alphabet."""
    arm = spec.arm(label)
    if label == BASELINE or arm is None:
        return label
    try:
        return bench_label(arm)
    except ValueError:  # several knobs: no `loss[knob=value]` name says them all
        return label.replace("-", "_")


def model_label(study: dict[str, Any], job: JobSpec) -> str:
    """`smollm2` for a bench cell (`<model>-<task>`), else the model's source."""
    prefix, _, task = study["name"].rpartition("-")
    return prefix if prefix and task == job.data.task else job.model.source


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _short(job_id: str) -> str:
    return hashlib.sha256(job_id.encode()).hexdigest()[:8]


def run_record(client: Client, spec: StudySpec, study: dict[str, Any], run: Run, model: str) -> Run:
    """One succeeded run of the study (its entry in the result) as a bench record."""
    job = JobSpec.model_validate(run["spec"])
    split = job.data.eval_split
    row = client.json("GET", f"/v1/jobs/{run['job_id']}")
    logged = client.json("GET", f"/v1/jobs/{run['job_id']}/metrics")["items"]
    timed = [r["step_time_s"] for r in logged if r.get("step_time_s") is not None]
    started, finished = (datetime.fromisoformat(row[k]) for k in ("started_at", "finished_at"))
    answers = run["predictions"] or []
    return {
        "part": study["name"],
        "model": model,
        "task": job.data.task,
        "loss": loss_label(spec, run["arm"]),
        "seed": run["seed"],
        "job_id": run["job_id"],
        "study": study["id"],
        "spec": run["spec"],
        "provenance": run["provenance"],
        "commit": run["provenance"]["git_commit"],
        "decoding": {split: run["provenance"]["decoding"]},
        # The bench's metrics leave out the held-out losses (ce, loss): not answer scores.
        "metrics": {split: {k: v for k, v in run["metrics"].items() if k not in ("ce", "loss")}},
        "intervals": run.get("intervals") or {},
        "predictions": {split: [a["prediction"] for a in answers]},
        "targets": {split: [a["target"] for a in answers]},
        "curve": [
            {"step": r["step"], **{k: _num(r.get(f"eval_{k}")) for k in CURVE}}
            for r in logged
            if "eval_exact_match" in r
        ],
        "step_time_s": statistics.fmean(timed) if timed else None,
        "wall_s": (finished - started).total_seconds(),
        "final_loss": _num(logged[-1].get("loss")) if logged else None,
        "final_ce": _num(logged[-1].get("ce")) if logged else None,
    }


def sweep_record(client: Client, run: Run, model: str) -> tuple[str, Run]:
    """A study's sweep as the bench keeps one: its best trial's config and validation score;
    the file name says which (`-lr-`: ce's learning rate) as readme_pretrained reads it."""
    tune = TuneSpec.model_validate(client.json("GET", f"/v1/tunes/{run['job_id']}")["spec"])
    trials = client.json("GET", f"/v1/tunes/{run['job_id']}/trials")["items"]
    best = best_row(trials, lambda t: t.get("best_metric"), tune.metric_mode)
    if best is None:
        raise ClientError(f"sweep {run['job_id']} has no trial with a score")
    what = "study-tune-lr" if run["arm"] == BASELINE else f"study-tune-{run['arm']}"
    steps = tune.base.train.steps
    found = {
        "config": best["config"],
        "metrics": {tune.metric_key: best["best_metric"]},
        "detail": f"{len(trials)} trials x {steps} steps, sweep {run['job_id']}",
        "job_id": run["job_id"],
    }
    return f"sweep-{what}-{model}-{tune.base.data.task}-{_short(run['job_id'])}.json", found


def records(
    client: Client, study: dict[str, Any], partial: bool = False
) -> tuple[dict[str, Run], dict[str, Run]]:
    """Every succeeded run and sweep of a finished study (`partial`: of a running one, so far),
    by the file name it is kept as (a run's: the bench's run id, the job id's digest in
    place of the spec's). Each run is read whole from /v1/studies/{id}/runs/{job_id}."""
    if study["status"] != "succeeded" and not (partial and study["status"] == "running"):
        raise ClientError(f"study {study['id']} is {study['status']}: only a finished study's "
                          "runs are kept (--partial: a running one's so far)")  # fmt: skip
    spec = StudySpec.model_validate(study["spec"])
    model = model_label(study, spec.base)
    named = model.replace(":", "_")  # a model source (`random:tiny-char`) in a file name
    runs, sweeps = {}, {}
    for run in study["runs"]:
        if run["status"] != "succeeded" or run.get("kept_from"):
            continue  # unfinished, or taken over: kept where it ran
        if run["kind"] == "job":
            whole = client.json("GET", f"/v1/studies/{study['id']}/runs/{run['job_id']}")
            record = run_record(client, spec, study, whole, model)
            found = run_id(
                named, record["task"], record["loss"], run["seed"], _short(run["job_id"])
            )
            runs[f"{found}.json"] = record
        else:
            name, found_sweep = sweep_record(client, run, named)
            sweeps[name] = found_sweep
    return runs, sweeps


def keep(folder: Path, runs: dict[str, Run], sweeps: dict[str, Run]) -> None:
    """Write the records into `folder`, refusing any run the folder already keeps from
    another job (one run per part, loss and seed: a table never counts a seed twice)."""
    kept, _ = load_runs(folder)
    have = {(r["part"], r["loss"], r["seed"]): r["job_id"] for r in kept}
    clash = [
        f"{r['part']}/{r['loss']}/s{r['seed']}"
        for r in runs.values()
        if have.get((r["part"], r["loss"], r["seed"]), r["job_id"]) != r["job_id"]
    ]
    if clash:
        raise ClientError(f"--records {folder} already keeps other runs of {', '.join(clash)}: "
                          "name a folder of its own", 2)  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    for name, record in {**runs, **sweeps}.items():
        (folder / name).write_text(json.dumps(record, indent=1) + "\n")


def piece_name(piece: dict[str, Any]) -> str:
    seed = "" if piece["kind"] == "tune" else f"-s{piece['seed']}"
    return f"{piece['kind']}-{piece['arm']}{seed}.json"


def read_kept(folder: Path, study: dict[str, Any]) -> dict[str, Any]:
    """The kept work in `folder`, one piece a file, as POST /v1/studies/resume takes it."""
    pieces = [json.loads(f.read_text()) for f in sorted(folder.glob("*.json"))]
    return {
        "study": study.get("id", "kept"),
        "name": study["name"],
        "sweeps": [p for p in pieces if p["kind"] == "tune"],
        "runs": [p for p in pieces if p["kind"] == "job"],
    }


def write_kept(client: Client, study: dict[str, Any], folder: Path) -> int:
    """Every succeeded sweep and run of the study into `folder`, one file each; a piece
    kept there from another job is refused (one per arm and seed). The count written."""
    work = client.json("GET", f"/v1/studies/{study['id']}/kept")
    pieces = [*work["sweeps"], *work["runs"]]
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for piece in pieces:
        path = folder / piece_name(piece)
        if path.exists():
            if json.loads(path.read_text())["job_id"] != piece["job_id"]:
                raise ClientError(f"--kept {path} holds another job's {piece_name(piece)}", 2)
            continue
        path.write_text(json.dumps(piece, separators=(",", ":")) + "\n")
        written += 1
    return written


def post(
    client: Client, spec_file: Path, questions: int | None, kept: Path | None = None
) -> dict[str, Any]:
    """POST the study file (its base reading `questions` uploaded word problems); with
    `kept`, as a study resumed from the pieces kept in that folder."""
    body: dict[str, Any] = load_spec_file(spec_file)
    if questions is not None:
        with tempfile.TemporaryDirectory() as tmp:
            path = write_user_jsonl(Path(tmp) / "questions.jsonl", questions)
            with path.open("rb") as fh:
                uploaded = client.upload("/v1/files", fh, path.name, {"purpose": "fine-tune"})
        data = {k: v for k, v in body["base"]["data"].items() if k != "path"}
        body["base"]["data"] = {**data, "task": "jsonl", "file": uploaded["id"]}
    if kept is not None:
        work = read_kept(kept, body)
        resumed: dict[str, Any] = client.json(
            "POST", "/v1/studies/resume", body={"spec": body, "kept": work}
        )
        return resumed
    found: dict[str, Any] = client.json("POST", "/v1/studies", body=body)
    return found


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--spec", type=Path, help="a StudySpec file to post and follow")
    which.add_argument("--study", help="the id of a study that has run")
    p.add_argument("--records", type=Path, required=True, help="the folder to keep them in")
    p.add_argument("--questions", type=int, help="upload N generated word problems as the data")
    p.add_argument("--kept", type=Path, help="a folder of the study's kept work (module doc)")
    p.add_argument(
        "--partial",
        action="store_true",
        help="with --study: keep the runs of a study still running that have succeeded so far",
    )
    args = p.parse_args(argv)
    if args.spec is not None and not args.spec.is_file():
        p.error(f"--spec {args.spec}: no such file")
    if args.partial and args.study is None:
        p.error("--partial needs --study (a study that is running)")
    if args.questions is not None and (args.spec is None or args.questions < 1):
        p.error("--questions needs --spec and at least 1 row")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    home = numtune_home()
    client = Client(resolve_url(home), resolve_token(home))
    try:
        if args.spec is not None:
            study = follow(client, post(client, args.spec, args.questions, args.kept))
        else:
            study = client.json("GET", f"/v1/studies/{args.study}")
        render(study)
        runs, sweeps = records(client, study, partial=args.partial)
        keep(args.records, runs, sweeps)
        if args.kept is not None:
            print(f"kept {write_kept(client, study, args.kept)} new pieces in {args.kept}")
        # The study itself, as the service answered: its progress, or its whole result
        # (bench/readme_protocol2.py renders the README's section from it).
        # A folder of its own: the records folder's *.json are run records only.
        snapshot = args.records / "studies" / f"{study['name']}.json"
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        kept = {**study, "kept_at": datetime.now(UTC).isoformat(timespec="seconds")}
        snapshot.write_text(json.dumps(kept, indent=1) + "\n")
    except ClientError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.code
    finally:
        client.close()
    print(f"kept {len(runs)} runs and {len(sweeps)} sweeps of {study['id']} in {args.records}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
