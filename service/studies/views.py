"""The bodies of /v1/studies: a study as the API, the CLI and the dashboard show it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from jobs.spec import BASELINE
from service.store import JobRow, StudyRow
from service.studies.result import run_metrics


class StudyRunOut(BaseModel):
    arm: str
    seed: int | None = Field(None, description="None for a sweep")
    kind: str = Field(
        description="job (an evaluation run) or tune (a tuned arm's sweep; arm ce: tune_lr's)"
    )
    job_id: str
    kept_from: str | None = Field(
        None, description="adopted from kept work (POST /v1/studies/resume): the job that ran it"
    )
    status: str = Field(description="the job's status; deleted when its record is gone")
    metrics: dict[str, float | None] = Field(default_factory=dict)


class StudyRunRecord(StudyRunOut):
    """`GET /v1/studies/{id}/runs/{job_id}`: one evaluation run as the result names it."""

    spec: dict[str, Any] | None = Field(None, description="the run's JobSpec")
    provenance: dict[str, Any] | None = Field(
        None, description="numtune version and commit, data sha256, decoding"
    )
    intervals: dict[str, float | None] = Field(
        default_factory=dict, description="its calibrated 90 % interval's figures ({}: none)"
    )
    predictions: list[dict[str, Any]] | None = Field(
        None, description="per-question answers once it succeeded (None: none kept)"
    )


class StudyOut(BaseModel):
    id: str
    name: str
    owner: str
    status: str = Field(description="running, cancelling, succeeded, failed or cancelled")
    detail: str | None = None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None
    primary_metric: str = Field(description="the first primary metric")
    primary_metrics: list[str] = Field(
        default_factory=list, description="every primary metric (Holm over them × arms)"
    )
    arms: list[str] = Field(description="ce (the baseline) first, then the arms' labels")
    seeds: list[int]
    runs: list[StudyRunOut]
    ended: int = Field(description="runs and sweeps that have ended")
    result: dict[str, Any] | None = Field(
        None,
        description=(
            "once every run ended: comparison (per arm: runs, vs_ce with diff, ci, p, "
            "p_boot, p_holm, equivalent (TOST, Holm over the family), wins, primary_tests "
            "(one per primary metric), exploratory tests (raw p), and a verdict that says "
            "what it rests on (footing); secondary tests, with the "
            "calibrated 90 % interval's width and score where runs measured them), intervals "
            "(per arm: the calibrated 90 % interval's out-of-sample coverage, median relative "
            "width, interval score and wide flag, means over its runs), missing arms, "
            "reference (a table study: gradient boosting fitted on the same training rows and "
            "scored on the same held-out rows per seed, outside the tests), and "
            "every run's spec, provenance and per-question predictions"
        ),
    )
    curves_url: str = Field(description="SVG of every arm's learning curve")
    spec: dict[str, Any]

    @classmethod
    def of(cls, row: StudyRow, jobs: dict[str, JobRow]) -> StudyOut:
        runs = []
        for run in row.runs:
            job = jobs.get(run["job_id"])
            runs.append(
                StudyRunOut(
                    **run,
                    status=job.status if job else "deleted",
                    metrics=run_metrics(job) if job else {},
                )
            )
        spec = row.spec
        return cls(
            id=row.id,
            name=row.name,
            owner=row.owner,
            status=row.status,
            detail=row.detail,
            created_at=row.created_at,
            updated_at=row.updated_at,
            finished_at=row.finished_at,
            primary_metric=spec.primary,
            primary_metrics=spec.primaries,
            arms=[BASELINE, *spec.labels()],
            seeds=list(spec.seeds),
            runs=runs,
            ended=sum(r.status not in ("queued", "submitted", "running") for r in runs),
            result=row.result,
            curves_url=f"/v1/studies/{row.id}/curves",
            spec=row.spec_json,
        )


class StudyPage(BaseModel):
    items: list[StudyOut]
    next_cursor: str | None = None
