"""A study's kept work: its sweeps and evaluation runs that succeeded, as one typed record
(`GET /v1/studies/{id}/kept`) that another service takes as the start of the same study
(`POST /v1/studies/resume`, service/studies/adopt.py). A long study outlives the home it
started on this way (a new machine, a rebuilt cluster): nothing that finished is trained again.

A run is kept with what the study's result reads of it and nothing more: its result (final
metrics, provenance), its decodings' scores (the validation scores `best_on_validation`
chooses by), the answers under each decoding, its metric rows (the learning curve) and its
calibration record with each calibrated question's figures. Its weights are not kept: an
adopted run can be compared, not served or registered.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from jobs.calibration.record import (
    CALIBRATION_FILE,
    Calibration,
    QuestionCalibration,
    read_record,
)
from jobs.records.models import (
    PREDICTIONS,
    DecodingsRecord,
    MetricsRow,
    RunResult,
    TrialRow,
    TuneResult,
)
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec, StudySpec, TuneSpec
from jobs.spec.study import MAX_RUNS
from jobs.stats import QuestionRecord
from jobs.storage.uri import join_uri, read_uri_text
from service.store import JobRow, StudyRow
from service.studies.intervals import run_questions

# An answers file's name in a run folder (predictions.jsonl, predictions-<decoding>.jsonl,
# predictions-validation-<decoding>.jsonl): never another of the folder's files.
ANSWERS_FILE = re.compile(r"^predictions[a-z0-9_-]{0,80}\.jsonl$")
MAX_QUESTIONS = 100_000  # answers per decoding file: a study's held-out set is far smaller


class KeptPiece(BaseModel):
    """What every kept sweep and run says of itself: which of the study's jobs it is, where
    it ran (the job id on the service that trained it) and when."""

    model_config = ConfigDict(extra="forbid")

    arm: str = Field(max_length=80)
    job_id: str = Field(max_length=128, description="the job that ran it, where it ran")
    started_at: datetime | None = None
    finished_at: datetime | None = None


class KeptSweep(KeptPiece):
    kind: Literal["tune"] = "tune"
    spec: TuneSpec
    result: TuneResult = Field(description="its best config is what the arm's runs take")
    trials: list[TrialRow] = Field(default_factory=list, max_length=10_000)


class KeptRun(KeptPiece):
    kind: Literal["job"] = "job"
    seed: int
    spec: JobSpec
    result: RunResult
    decodings: DecodingsRecord | None = None
    answers: dict[str, list[QuestionRecord]] = Field(
        description="each answers file of its folder by name (predictions.jsonl, and one "
        "per scored decoding and its validation rows)"
    )
    metrics: list[MetricsRow] = Field(default_factory=list, max_length=1_000_000)
    calibration: Calibration | None = None
    calibration_questions: list[QuestionCalibration] = Field(default_factory=list)

    @model_validator(mode="after")
    def _files(self) -> Self:
        """Only answers files its result names, under names a run folder could hold."""
        if self.result.status != "succeeded":
            raise ValueError(f"only a succeeded run is kept, not a {self.result.status} one")
        named = {PREDICTIONS}
        for record in (self.decodings, self.result.decodings):  # the result's is read first
            for scores in (record.scores if record else {}).values():
                named |= {scores.predictions, scores.validation_predictions or PREDICTIONS}
        if odd := sorted(n for n in named if not ANSWERS_FILE.match(n)):
            raise ValueError(f"decodings name {odd}: not answers files of a run folder")
        for name, rows in self.answers.items():
            if name not in named:
                raise ValueError(f"answers {name!r}: not an answers file its decodings name")
            if len(rows) > MAX_QUESTIONS:
                raise ValueError(f"answers {name!r}: {len(rows)} rows, at most {MAX_QUESTIONS}")
        return self


class KeptWork(BaseModel):
    """Every sweep and run of one study that succeeded (a NaN metric stays NaN)."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    study: str = Field(max_length=64, description="the study they were kept from")
    name: str = Field(max_length=80, description="its name")
    sweeps: list[KeptSweep] = Field(default_factory=list, max_length=MAX_RUNS)
    runs: list[KeptRun] = Field(default_factory=list, max_length=MAX_RUNS)


def origin(run: dict[str, Any]) -> str:
    """The job that trained a study's run: itself, or the one it was adopted from."""
    return str(run.get("kept_from") or run["job_id"])


def _whence(run: dict[str, Any], row: JobRow) -> dict[str, Any]:
    """Which of the study's jobs a piece is, the job that ran it, and when."""
    return {"arm": run["arm"], "job_id": origin(run), "started_at": row.started_at,
            "finished_at": row.finished_at}  # fmt: skip


def _calibration(row: JobRow) -> Calibration | None:
    if not row.best_checkpoint:
        return None
    try:
        raw = json.loads(read_uri_text(join_uri(row.best_checkpoint, CALIBRATION_FILE)))
    except FileNotFoundError:
        return None
    return read_record(raw)  # unreadable: None and a warning, as the study's result reads it


def kept_run(run: dict[str, Any], row: JobRow, storage: str) -> KeptRun:
    """One succeeded evaluation run, read from its row, its folder and its checkpoint."""
    files = RunFiles.for_job(row.id, storage)
    decodings = files.read_decodings()
    names = {PREDICTIONS}
    for scores in (decodings.scores if decodings else {}).values():
        names.add(scores.predictions)
        if scores.validation_predictions:
            names.add(scores.validation_predictions)
    answers = {n: found for n in sorted(names) if (found := files.read_predictions(n))}
    spec = row.spec
    assert isinstance(spec, JobSpec)  # a study's run is a job
    return KeptRun(
        **_whence(run, row),
        seed=run["seed"],
        spec=spec,
        result=RunResult.model_validate(row.result),
        decodings=decodings,
        answers=answers,
        metrics=files.read_metrics(),
        calibration=_calibration(row),
        calibration_questions=run_questions(row),
    )


def export(study: StudyRow, jobs: dict[str, JobRow], storage: str) -> KeptWork:
    """Every sweep and run of the study that has succeeded so far."""
    sweeps, runs = [], []
    for run in study.runs:
        row = jobs.get(run["job_id"])
        if row is None or row.status != "succeeded":
            continue
        if run["kind"] == "tune":
            spec = row.spec
            assert isinstance(spec, TuneSpec)  # a study's sweep is a tune
            trials = [TrialRow.model_validate(t) for t in row.trials or []]
            result = TuneResult.model_validate(row.result)
            sweeps.append(KeptSweep(**_whence(run, row), spec=spec, result=result, trials=trials))
        else:
            runs.append(kept_run(run, row, storage))
    return KeptWork(study=study.id, name=study.name, sweeps=sweeps, runs=runs)


class StudyResume(BaseModel):
    """`POST /v1/studies/resume`: a study, and the kept work it starts from."""

    model_config = ConfigDict(extra="forbid")

    spec: StudySpec
    kept: KeptWork
