"""Jobs, a job's live page, Compare and Sweeps. Reads and cancel go through the same use
cases as REST (`service/jobs/use_cases.py`: another owner's job is a 404), so the dashboard and
the API cannot disagree on who may see or do what."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse
from markupsafe import Markup

from jobs.spec import TuneSpec
from service.deps import CancelDep, JobsDep
from service.errors import APIError, Forbidden
from service.jobs import pause as pausing
from service.jobs import use_cases as ops
from service.jobs.logstream import whole_log
from service.jobs.states import TERMINAL
from service.jobs.use_cases import owned
from service.platform.charts import PALETTE, Dot, Series, line_chart, scatter
from service.store import JobRow
from service.web.deps import FormDep, ViewerDep, page
from service.web.messages import shown

router = APIRouter(prefix="/ui", include_in_schema=False)
LOG_TAIL_CHARS = 6000  # the job page shows the end of the log; the API has all of it
MAX_COMPARED = 12  # runs overlaid at once: more is unreadable (and each is a query)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _listed(jobs: JobsDep, who: ViewerDep, kind: str) -> list[JobRow]:
    """Newest first: the caller's own, or everyone's for an admin (as GET /v1/jobs)."""
    rows, _ = ops.listing(jobs, who.principal, kind=kind)
    return rows


def _points(rows: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    return [(r["step"], float(r[key])) for r in rows if isinstance(r.get(key), int | float)]


def loss_charts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The loss split into CE and the numeric part (total − CE: λ·numeric, on its own
    axis: it is often orders of magnitude below CE), and every eval metric over steps."""
    numeric = [
        (r["step"], float(r["loss"]) - float(r["ce"]))
        for r in rows
        if isinstance(r.get("loss"), int | float) and isinstance(r.get("ce"), int | float)
    ]
    loss = line_chart(
        [
            Series("total", _points(rows, "loss"), PALETTE[6], dashed=True),
            Series("CE", _points(rows, "ce"), PALETTE[0]),
        ],
        "training loss: total and cross entropy",
        y_label="loss",
    )
    part = line_chart(
        [Series("numeric (λ·term)", numeric, PALETTE[1])],
        "training loss: the numeric part (total − CE)",
        y_label="λ·numeric",
    )
    keys = sorted({k for r in rows for k in r if k.startswith("eval_")})
    series = [
        Series(k.removeprefix("eval_"), _points(rows, k), PALETTE[i % 7])
        for i, k in enumerate(keys)
    ]
    evals = line_chart(series, "eval metrics", y_label="metric")
    return {"loss": loss, "numeric": part, "eval": evals}


@router.get("/jobs", response_class=HTMLResponse)
def jobs_page(request: Request, jobs: JobsDep, who: ViewerDep) -> HTMLResponse:
    return page(request, "jobs.html", who, rows=_rows(jobs, who))


@router.get("/jobs/rows", response_class=HTMLResponse)
def jobs_rows(request: Request, jobs: JobsDep, who: ViewerDep) -> HTMLResponse:
    """The list's table body alone: the page's script polls it."""
    return page(request, "_job_rows.html", who, rows=_rows(jobs, who))


def _rows(jobs: JobsDep, who: ViewerDep) -> list[tuple[JobRow, dict[str, Any], str]]:
    rows = _listed(jobs, who, "job")
    last = jobs.last_metrics([r.id for r in rows])
    return [(r, last.get(r.id, {}), _best(r)) for r in rows]


def _best(row: JobRow) -> str:
    """The final value of the metric the run watched (else its first eval metric)."""
    finals = _finals(row)
    watched = f"eval_{row.job_spec.train.metric}"
    key = (
        watched
        if watched in finals
        else next((k for k in sorted(finals) if k.startswith("eval_")), None)
    )
    return f"{key.removeprefix('eval_')} {finals[key]:.4g}" if key else ""


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(
    job_id: str, request: Request, jobs: JobsDep, who: ViewerDep, msg: str = ""
) -> HTMLResponse:
    row = owned(jobs, job_id, "job", who.principal)
    return page(request, "job.html", who, job=row, msg=shown(msg), **_live(jobs, row))


@router.get("/jobs/{job_id}/live", response_class=HTMLResponse)
def job_live(job_id: str, request: Request, jobs: JobsDep, who: ViewerDep) -> HTMLResponse:
    row = owned(jobs, job_id, "job", who.principal)
    return page(request, "_job_live.html", who, job=row, **_live(jobs, row))


def _live(jobs: JobsDep, row: JobRow) -> dict[str, Any]:
    metrics = jobs.metrics(row.id)
    # Ray colours its worker prefixes: read a little more, strip the codes, then cut.
    text = ANSI.sub("", jobs.log_tail(row.id, LOG_TAIL_CHARS * 2))
    return {
        "metrics": metrics,
        "charts": loss_charts(metrics),
        "log_tail": text[-LOG_TAIL_CHARS:],
        "terminal": row.status in TERMINAL,
    }


@router.get("/jobs/{job_id}/log")
def job_log(job_id: str, jobs: JobsDep, who: ViewerDep) -> StreamingResponse:
    """The whole log as text, for the session (the API's /logs wants a bearer token)."""
    row = owned(jobs, job_id, "job", who.principal)
    return StreamingResponse(whole_log(jobs, row.id), media_type="text/plain")


@router.post("/jobs/{job_id}/cancel")
def cancel_job(
    job_id: str, jobs: JobsDep, canceller: CancelDep, who: ViewerDep, form: FormDep
) -> RedirectResponse:
    if not who.may("submit"):
        raise Forbidden("this token lacks the 'submit' scope")
    row = owned(jobs, job_id, "job", who.principal)
    try:
        ops.cancel(canceller, row, who.principal)
        code = "cancelled"
    except APIError as error:  # already ended, Ray unreachable: shown, not a crash page
        code = f"cancel_{error.code}"
    return RedirectResponse(f"/ui/jobs/{job_id}?msg={code}", status_code=303)


@router.post("/jobs/{job_id}/{verb}")
def pause_or_resume(
    job_id: str, verb: Literal["pause", "resume"], jobs: JobsDep, who: ViewerDep, form: FormDep
) -> RedirectResponse:
    """The job page's Pause / Resume button (service/jobs/pause.py), CSRF-checked as every
    dashboard form."""
    if not who.may("submit"):
        raise Forbidden("this token lacks the 'submit' scope")
    act = pausing.pause if verb == "pause" else pausing.resume
    try:
        row = act(jobs, job_id, who.principal)
        code = "paused" if row.status == "paused" else f"{verb}_{row.status}"
    except APIError as error:  # ended, another's (404), still pausing: shown, not a crash
        code = f"{verb}_{error.code}"
    return RedirectResponse(f"/ui/jobs/{job_id}?msg={code}", status_code=303)


@router.get("/compare", response_class=HTMLResponse)
def compare(
    request: Request,
    jobs: JobsDep,
    who: ViewerDep,
    ids: Annotated[list[str], Query()] = [],  # noqa: B006 (FastAPI's idiom)
    baseline: str = "",
    sweep: str = "",
) -> HTMLResponse:
    """Runs side by side: overlaid curves and final metrics with differences to a baseline.
    `sweep=<tune id>` compares that sweep's trials (their final values; Ray Tune keeps no
    per-step rows of trials in the store, so no curves for them)."""
    chosen = list(dict.fromkeys(ids))[:MAX_COMPARED]
    picked = [owned(jobs, i, "job", who.principal) for i in chosen]
    base = next((r for r in picked if r.id == baseline), picked[0] if picked else None)
    curves = {r.id: jobs.metrics(r.id) for r in picked}
    trials = owned(jobs, sweep, "tune", who.principal).trials or [] if sweep else []
    return compare_view(
        request, who, picked, base, curves, choices=_listed(jobs, who, "job"),
        sweep=sweep, trials=trials,
    )  # fmt: skip


def compare_view(
    request: Request,
    who: ViewerDep,
    picked: Sequence[Any],
    base: Any,
    curves: dict[str, list[dict[str, Any]]],
    label: Callable[[Any], str] | None = None,
    watched: Callable[[Any], str] | None = None,
    loss_chart: bool = True,
    **context: Any,
) -> HTMLResponse:
    """The Compare page for any runs shaped like job rows (id, name, spec, result), with
    their metrics rows in `curves`: jobs here, the accuracy study's runs in pages_study.
    `label` names a run, `watched` says the metric it was trained to watch."""
    label = label or _label
    # The study keeps no per-step loss (only held-out evals): no forever-empty chart.
    loss = Markup("")
    if loss_chart:
        loss = line_chart(
            [
                Series(label(r), _points(curves[r.id], "loss"), PALETTE[i % 7])
                for i, r in enumerate(picked)
            ],
            "training loss (total)",
            y_label="loss",
        )
    eval_key = _eval_key(picked, curves, watched or _watched)
    evals = line_chart(
        [
            Series(label(r), _points(curves[r.id], eval_key), PALETTE[i % 7])
            for i, r in enumerate(picked)
        ],
        f"{eval_key} over steps",
        y_label=eval_key,
    )
    finals = {r.id: _finals(r) for r in picked}
    # Held-out metrics first: they are what a comparison is for.
    keys = sorted(
        {k for f in finals.values() for k in f}, key=lambda k: (not k.startswith("eval_"), k)
    )
    context = {"action": "/ui/compare", "hidden": {}, "href": _href, "sweep": "",
               "trials": [], **context}  # fmt: skip
    return page(
        request, "compare.html", who, picked=picked, base=base, loss=loss, evals=evals,
        finals=finals, keys=keys, label=label, palette=PALETTE, **context,
    )  # fmt: skip


def _href(row: JobRow) -> str:
    return f"/ui/jobs/{row.id}"


def _label(row: JobRow) -> str:
    return f"{row.name} ({row.job_spec.loss.name}, {row.id[-6:]})"


def _watched(row: JobRow) -> str:
    return row.job_spec.train.metric


def _finals(row: Any) -> dict[str, float]:
    found = (row.result or {}).get("metrics") or {}
    return {k: float(v) for k, v in found.items() if isinstance(v, int | float)}


def _eval_key(
    rows: Sequence[Any], curves: dict[str, list[dict[str, Any]]], metric: Callable[[Any], str]
) -> str:
    """The metric the runs were trained to watch when they agree and report it; else the
    first eval metric any of them reports."""
    watched = {f"eval_{metric(r)}" for r in rows}
    seen = sorted({k for c in curves.values() for row in c for k in row if k.startswith("eval_")})
    if len(watched) == 1 and watched <= set(seen):
        return watched.pop()
    return seen[0] if seen else "eval_exact_match"


@router.get("/sweeps", response_class=HTMLResponse)
def sweeps(request: Request, jobs: JobsDep, who: ViewerDep) -> HTMLResponse:
    return page(request, "sweeps.html", who, tunes=_listed(jobs, who, "tune"))


@router.get("/sweeps/{tune_id}", response_class=HTMLResponse)
def sweep_page(tune_id: str, request: Request, jobs: JobsDep, who: ViewerDep) -> HTMLResponse:
    row = owned(jobs, tune_id, "tune", who.principal)
    trials = row.trials or []
    best = (row.result or {}).get("best_trial")
    weights = [float(t["config"].get("weight", 0)) for t in trials]
    lo, hi = (min(weights), max(weights)) if weights else (0.0, 1.0)
    dots = [
        Dot(
            x=float(t["config"].get("bandwidth", float("nan"))),
            y=float(t["best_metric"]) if t.get("best_metric") is not None else float("nan"),
            shade=(w - lo) / (hi - lo) if hi > lo else 0.5,
            label=f"{t.get('trial_id')}: {t['status']}, weight {w:.3g}",
            best=t.get("trial_id") == best,
            stopped=t["status"] == "stopped_early",
        )
        for t, w in zip(trials, weights, strict=True)
    ]
    spec = row.spec
    metric = spec.metric if isinstance(spec, TuneSpec) else "metric"
    chart = scatter(dots, f"{metric} vs bandwidth (colour: weight)", "bandwidth (log)", metric)
    return page(
        request, "sweep.html", who, tune=row, trials=trials, best=best, chart=chart,
        weights=(lo, hi),
    )  # fmt: skip
