"""The Study page (/ui/study): the caller's studies (/v1/studies), each opening a live page
(/ui/studies/<id>: its runs, every arm's learning curves, and once compared the verdicts);
below them the accuracy study's cells from the bench's JSON, with one click from a cell or a
run to the Compare page (/ui/study/compare), drawn by pages_jobs.compare_view like jobs are.
Read-only GETs behind the same login; the bench's file is read from NUMTUNE_STUDY_RESULTS."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from service.deps import JobsDep, SettingsDep, StudiesDep
from service.studies import result as study_result
from service.studies import use_cases as ops
from service.web.deps import ViewerDep, page
from service.web.pages_jobs import MAX_COMPARED, compare_view
from service.web.study import (
    METRIC,
    StudyRun,
    StudyUnreadable,
    cell_runs,
    cells,
    load,
    study_files,
    survives,
)

router = APIRouter(prefix="/ui", include_in_schema=False)
BASELINE = "ce/mean"
ENDED = (
    "succeeded",
    "failed",
    "cancelled",
)  # the comparison the study itself makes: every loss against ce


def compare_url(stem: str, model: str, task: str, split: str, ids: Sequence[str] = ()) -> str:
    """The Compare view of a cell (its losses' means) or of chosen runs, against ce's mean."""
    query = [("study", stem), ("model", model), ("task", task), ("split", split)]
    query += [("ids", i) for i in ids]
    if ids and any(i.startswith("ce/") for i in ids):
        query.append(("baseline", BASELINE))
    return f"/ui/study/compare?{urlencode(query)}"


@router.get("/study", response_class=HTMLResponse)
def study_page(
    request: Request, settings: SettingsDep, store: StudiesDep, who: ViewerDep
) -> HTMLResponse:
    setting = settings.study_results
    files = study_files(setting)
    studies: list[dict[str, Any]] = []
    problems: list[str] = []
    for path in files:
        try:
            found = load(path)
            studies.append(
                {"stem": path.stem, "path": str(path), "data": found, "cells": cells(found)}
            )
        except StudyUnreadable as error:
            problems.append(str(error))
    rows, _ = ops.listing(store, who.principal, 50, None)
    mine = [ops.shown(store, r) for r in rows]
    return page(
        request, "study.html", who, studies=studies, problems=problems, setting=setting,
        url=compare_url,
        survives=survives, metric=METRIC, seeds_of=_seeds_of, mine=mine,
    )  # fmt: skip


def _live(studies: StudiesDep, jobs: JobsDep, study_id: str, who: ViewerDep) -> dict[str, Any]:
    row = ops.owned(studies, study_id, who.principal)
    chart = study_result.curves(row.spec, row, jobs)
    study = ops.shown(studies, row)
    return {"study": study, "chart": chart, "terminal": study.status in ENDED}


@router.get("/studies/{study_id}", response_class=HTMLResponse)
def live_study(
    study_id: str, request: Request, studies: StudiesDep, jobs: JobsDep, who: ViewerDep
) -> HTMLResponse:
    """One of the caller's studies, updated while it runs."""
    return page(request, "study_live.html", who, **_live(studies, jobs, study_id, who))


@router.get("/studies/{study_id}/live", response_class=HTMLResponse)
def live_fragment(
    study_id: str, request: Request, studies: StudiesDep, jobs: JobsDep, who: ViewerDep
) -> HTMLResponse:
    """The live part alone: the page's script polls it."""
    return page(request, "_study_live.html", who, **_live(studies, jobs, study_id, who))


def _seeds_of(study: dict[str, Any], model: str, task: str, loss: str) -> list[Any]:
    return [
        r.get("seed")
        for r in study["runs"]
        if isinstance(r, dict)
        and (r.get("model"), r.get("task"), r.get("loss")) == (model, task, loss)
    ]


@router.get("/study/compare", response_class=HTMLResponse)
def study_compare(
    request: Request,
    settings: SettingsDep,
    who: ViewerDep,
    study: str,
    model: str,
    task: str,
    split: str,
    ids: Annotated[list[str], Query()] = [],  # noqa: B006 (FastAPI's idiom)
    baseline: str = BASELINE,
) -> HTMLResponse:
    """A cell's runs on the Compare page; without ids, each loss's mean over its seeds."""
    path = next((p for p in study_files(settings.study_results) if p.stem == study), None)
    try:
        if path is None:
            raise StudyUnreadable(f"no study results named {study!r}")
        runs = cell_runs(load(path), model, task, split)
        if not runs:
            raise StudyUnreadable(f"{study}: no runs of {model} on {task} scored on {split}")
    except StudyUnreadable as error:
        return page(request, "study.html", who, studies=[], problems=[str(error)], setting=None,
                    status_code=404)  # fmt: skip
    by_id = {r.id: r for r in runs}
    chosen = [i for i in dict.fromkeys(ids) if i in by_id][:MAX_COMPARED]
    if not chosen:
        chosen = [r.id for r in runs if r.id.endswith("/mean")][:MAX_COMPARED]
    picked = [by_id[i] for i in chosen]
    base = by_id.get(baseline) if baseline in chosen else (picked[0] if picked else None)
    return compare_view(
        request, who, picked, base, {r.id: r.curve for r in picked}, label=_label,
        watched=lambda r: METRIC, loss_chart=False, choices=runs, action="/ui/study/compare",
        href=lambda r: "",
        hidden={"study": study, "model": model, "task": task, "split": split},
        cell=f"{model} · {task} · {split}", stem=study,
    )  # fmt: skip


def _label(run: StudyRun) -> str:
    return run.id  # "<loss>/s<seed>" or "<loss>/mean": the cell is the page's heading
