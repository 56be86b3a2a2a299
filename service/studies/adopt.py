"""A study resumed from its kept work (service/studies/kept.py): the jobs it has at its start.

The study is expanded as the study loop would expand it, and each job the kept work already
holds is taken over instead of queued: first its first jobs (`first_jobs`), then, for every
sweep taken over, the runs its best config gates (at the rate it chose), exactly as the loop
adds them once a sweep succeeds (`swept_loss`, `arm_jobs`). A kept piece is taken over only
where the study builds the same job: same kind, arm and seed, and the same spec, field for
field, after the service's own checks. A piece the study would not build, or not yet (a run
whose sweep is not kept: its rate is not known), is a 422 naming it: nothing is recorded.
An adopted job is recorded as succeeded, with its files written into a folder of its own,
and it names the job it was kept from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from jobs.calibration.record import CALIBRATION_FILE, QUESTIONS_FILE
from jobs.records.models import MetricsRow
from jobs.records.run_files import RunFiles
from jobs.spec import BASELINE, JobSpec, StudySpec, TuneSpec
from service.store.studies import EndedJob
from service.studies.expand import NewJob, arm_jobs, first_jobs
from service.studies.kept import KeptRun, KeptSweep, KeptWork
from service.studies.progress import is_rate, swept_runs

Piece = KeptSweep | KeptRun
Key = tuple[str, str, int | None]  # kind, arm, seed (None: a sweep)
Problems = list[dict[str, str]]
KEPT_CHECKPOINT = "kept_checkpoint"  # the calibration record, where a checkpoint kept it


@dataclass
class Planned:
    job: NewJob
    piece: Piece | None = None  # the kept piece it is taken over from; None: queued


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _leaves(inner, f"{path}.{key}" if path else str(key))
    else:
        yield path, value


def differences(kept: dict[str, Any], built: dict[str, Any]) -> list[str]:
    """The fields (dotted paths) where two dumped specs differ, at most five."""
    a, b = dict(_leaves(kept)), dict(_leaves(built))
    return sorted(k for k in a.keys() | b.keys() if a.get(k, ...) != b.get(k, ...))[:5]


def gated(spec: StudySpec, sweep: KeptSweep) -> list[NewJob]:
    """The jobs a succeeded sweep lets the study add, as the study loop adds them."""
    best = sweep.result.best_config or {}
    if spec.tune_lr is not None and not spec.per_arm_lr and sweep.arm == BASELINE:
        rate = best.get("lr")  # ce's learning-rate sweep: every other job, at its rate
        return (
            arm_jobs(spec, float(rate)) if isinstance(rate, int | float) and is_rate(rate) else []
        )
    return swept_runs(spec, sweep.arm, best, sweep.spec.base.train.lr)


def _indexed(kept: KeptWork) -> tuple[dict[Key, tuple[str, Piece]], Problems]:
    """Each kept piece by the job it claims to be, with where it sits in the body."""
    listed: list[tuple[str, Piece]] = [(f"kept.sweeps[{i}]", s) for i, s in enumerate(kept.sweeps)]
    listed += [(f"kept.runs[{i}]", r) for i, r in enumerate(kept.runs)]
    pieces: dict[Key, tuple[str, Piece]] = {}
    problems: Problems = []
    for where, piece in listed:
        key: Key = (piece.kind, piece.arm, piece.seed if isinstance(piece, KeptRun) else None)
        if key in pieces:
            what = f"{key[1]}'s sweep" if key[2] is None else f"{key[1]} seed {key[2]}"
            problems.append({"field": where, "message": f"{what} is kept twice"})
        pieces[key] = (where, piece)
    return pieces, problems


def plan(
    spec: StudySpec, kept: KeptWork, checked: Callable[[JobSpec | TuneSpec], dict[str, Any]]
) -> tuple[list[Planned], Problems]:
    """Every job the study starts with, each queued or taken over from a kept piece; and
    the problems (a kept piece it builds no job for, or builds differently). `checked` dumps
    a kept spec as the service's checks leave it (pinned data, as the study's own base)."""
    pieces, problems = _indexed(kept)
    planned, todo, used = [], list(first_jobs(spec)), set[Key]()
    while todo:
        job = todo.pop(0)
        entry, kind, _, built = job
        at: Key = (kind, entry["arm"], entry["seed"])
        found = pieces.get(at)
        if found is None:
            planned.append(Planned(job))
            continue
        where, piece = found
        used.add(at)
        if diff := differences(checked(piece.spec), built.model_dump(mode="json")):
            message = f"the study builds this {kind} with another spec: {', '.join(diff)} differ"
            problems.append({"field": f"{where}.spec", "message": message})
            continue
        planned.append(Planned(job, piece))
        if isinstance(piece, KeptSweep):
            todo += gated(spec, piece)
    for unused, (where, _) in pieces.items():
        if unused not in used:
            why = "its arm's sweep is not kept (its rate is not known yet)"
            if unused[0] == "tune" or unused[1] not in [BASELINE, *spec.labels()]:
                why = "the study has no such arm or sweep"
            elif unused[2] not in spec.seeds:
                why = f"the study has no seed {unused[2]}"
            problems.append({"field": where, "message": f"the study builds no such job: {why}"})
    return planned, problems


def _write_run(files: RunFiles, run: KeptRun) -> str | None:
    """The kept run's files in its new folder; its calibration's folder (None: none)."""
    for name, rows in run.answers.items():
        files.write_predictions(rows, name)
    if run.decodings is not None:
        files.write_decodings(run.decodings)
    files.write_metrics(_rows(run))
    if run.calibration is None:
        return None
    where = RunFiles.at(files.sub_uri(KEPT_CHECKPOINT))
    where.fs.create_dir(where.root, recursive=True)
    where.write_text(CALIBRATION_FILE, run.calibration.model_dump_json(indent=1))
    questions = run.calibration_questions
    where.write_text(QUESTIONS_FILE, "".join(q.model_dump_json() + "\n" for q in questions))
    return where.uri


def _rows(run: KeptRun) -> list[MetricsRow]:
    """Its metric rows without the checkpoints they name: those stayed on the machine that
    ran it."""
    return [
        MetricsRow.model_validate({k: v for k, v in r.as_dict().items() if k != "checkpoint"})
        for r in run.metrics
    ]


def adopted(storage: str, job_id: str, piece: Piece) -> EndedJob:
    """Write the kept piece's files under `job_id` and say how its row is recorded."""
    files = RunFiles.for_job(job_id, storage)
    metrics: list[dict[str, Any]] = []
    trials = None
    if isinstance(piece, KeptRun):
        checkpoint = _write_run(files, piece)
        metrics = [r.as_dict() for r in _rows(piece)]
    else:
        checkpoint = None  # its trials' checkpoints stayed with the machine that ran them
        trials = [t.model_dump() for t in piece.trials]
        files.write_trials(piece.trials)
    result = piece.result.model_copy(update={"best_checkpoint": checkpoint})
    files.write_result(result)
    return EndedJob(
        job_id=job_id,
        kept_from=piece.job_id,
        columns={
            "status": "succeeded",
            "detail": f"kept from {piece.job_id}: it ran elsewhere, its files were adopted",
            "result": result.model_dump(),
            "best_checkpoint": checkpoint,
            "trials": trials,
            "meta": {"kept_from": piece.job_id},  # its weights stayed there (registry.py)
            "started_at": piece.started_at,
            "finished_at": piece.finished_at,
        },
        metrics=metrics,
    )
