"""A finished study's result: its runs' outcomes (result.json and predictions.jsonl in each
run's folder, the calibrated interval its checkpoint measured) compared by
`jobs.stats.compare`, each run's provenance and per-question predictions beside it; and the
learning curves of every arm in one chart."""

from __future__ import annotations

import math
from collections import defaultdict
from html import escape
from typing import Any

from markupsafe import Markup

from jobs.calibration import per_arm
from jobs.records.run_files import RunFiles
from jobs.spec import BASELINE, StudySpec
from jobs.stats import QuestionRecord, RunOutcome, compare
from service.platform.charts import PALETTE, Series, line_chart
from service.store import JobRow, JobStore, StudyRow
from service.studies.decoding import arm_decodings, name_arms, read_under
from service.studies.families import families, footing
from service.studies.interval_notes import interval_notes
from service.studies.intervals import run_intervals, run_questions
from service.studies.kept import origin
from service.studies.plan import after as plan_after
from service.studies.reference import reference

SVG_NS = "http://www.w3.org/2000/svg"
STANDALONE_STYLE = (
    "<style>svg{background:white}text{font:11px sans-serif;fill:#374151}"
    ".axis{stroke:#9ca3af}</style>"
)
EVAL = "eval_"  # a run reports its held-out metrics as eval_<metric>


def run_metrics(row: JobRow) -> dict[str, float | None]:
    """The run's final held-out metrics without their prefix; NaN (e.g. an MAE with no
    parsed answer) as None."""
    found = (row.result or {}).get("metrics") or {}
    out: dict[str, float | None] = {}
    for key, value in found.items():
        if key.startswith(EVAL) and isinstance(value, int | float) and not isinstance(value, bool):
            out[key.removeprefix(EVAL)] = float(value) if math.isfinite(value) else None
    return out


def outcomes(
    study: StudyRow,
    jobs: dict[str, JobRow],
    storage: str,
    decodings: dict[str, str | None] | None = None,
) -> dict[str, list[RunOutcome]]:
    """Per arm, the outcome of each of its runs that succeeded: its final metrics and its
    per-question answers, read from the run's folder (result.json, predictions.jsonl; under
    the arm's decoding in `decodings`: decodings.json and that decoding's answers), and
    its calibrated interval's figures where its checkpoint has them."""
    arms: dict[str, list[RunOutcome]] = defaultdict(list)
    for run in study.runs:
        row = jobs.get(run["job_id"])
        if run["kind"] != "job" or row is None or row.status != "succeeded":
            continue
        decoding = (decodings or {}).get(run["arm"])
        # Named by the job that trained it (an adopted run's: the one it was kept from).
        found = RunFiles.for_job(row.id, storage).read_outcome(run["seed"], origin(run), decoding)
        if found is not None:
            # Each calibrated question's interval, its score and CRPS, beside its answer.
            questions, means = per_arm.join_questions(found.questions, run_questions(row))
            metrics = {**found.metrics, **run_intervals(row), **means}
            update = {"metrics": metrics, "questions": questions}
            arms[run["arm"]].append(found.model_copy(update=update))
    return arms


def missing(
    spec: StudySpec, study: StudyRow, jobs: dict[str, JobRow], have: dict[str, list[RunOutcome]]
) -> dict[str, str]:
    """Per arm, why it has no run to compare (its sweep or all its runs did not succeed)."""
    why: dict[str, str] = {}
    for label in [BASELINE, *spec.labels()]:
        if have.get(label):
            continue
        ended = [jobs.get(r["job_id"]) for r in study.runs if r["arm"] == label]
        states = sorted({(j.status if j else "deleted") for j in ended})
        why[label] = f"no run succeeded ({', '.join(states) or 'none created'})"
    return why


def build(
    spec: StudySpec, study: StudyRow, jobs: dict[str, JobRow], storage: str
) -> dict[str, Any]:
    """The result a study stores once every run has ended: the comparison (when ce and at
    least one arm have runs; the calibrated intervals' width and score among the secondary
    tests when the runs measured them), each arm's intervals, what is missing and why, and
    every run's provenance and per-question predictions, so the study can be audited and
    run again."""
    chosen = arm_decodings(spec, study, jobs, storage)  # each arm's decoding (and why)
    arms = outcomes(study, jobs, storage, {a: read_under(spec, a, c) for a, c in chosen.items()})
    result: dict[str, Any] = {
        "decodings": {label: c.model_dump(mode="json") for label, c in chosen.items()},
        "missing": missing(spec, study, jobs, arms),
        "comparison": None,
        "power": None,
        "intervals": per_arm.summary(arms),
        # Each arm left out of `intervals`: why (calibration off, no checkpoint, ...).
        "interval_notes": interval_notes(
            [BASELINE, *spec.labels()], study, jobs, per_arm.summary(arms)
        ),
        # A table study's gradient-boosting row: beside the arms, outside the tests.
        "reference": reference(spec, study, jobs),
    }
    compared = {BASELINE: arms.get(BASELINE, [])}
    compared.update({label: arms[label] for label in spec.labels() if arms.get(label)})
    if compared[BASELINE] and len(compared) > 1:
        secondary, exploratory = families(spec, compared)
        comparison = compare(
            compared,
            baseline=BASELINE,
            primary=spec.primaries,
            secondary=secondary,
            exploratory=exploratory,
            margin=spec.equivalence_margin,
            footing=footing(spec, study, jobs, storage),
        )
        result["comparison"] = comparison.model_dump(mode="json")
        name_arms(result["comparison"], chosen)
        result["power"] = plan_after(spec, comparison, compared)
    answers = {o.run_id: o.questions for runs in arms.values() for o in runs}
    result["runs"] = [
        run_record(run, jobs.get(run["job_id"]), answers.get(origin(run))) for run in study.runs
    ]
    return result


def run_record(
    run: dict[str, Any], row: JobRow | None, answers: list[QuestionRecord] | None
) -> dict[str, Any]:
    """One run as the result names it: its spec, provenance (numtune version and commit,
    data sha256, decoding) and per-question answers (None: the run kept none)."""
    if row is None:
        return {**run, "status": "deleted"}
    return {
        **run,
        "status": row.status,
        "metrics": run_metrics(row),
        "spec": row.spec_json,
        "provenance": (row.result or {}).get("provenance"),
        # The calibrated 90 % interval the run's checkpoint measured ({}: none).
        "intervals": run_intervals(row),
        "predictions": None if answers is None else [q.model_dump(mode="json") for q in answers],
    }


def one_run(
    study: StudyRow, jobs: dict[str, JobRow], storage: str, job_id: str
) -> dict[str, Any] | None:
    """One evaluation run of the study as its result will name it, as soon as it ended (a
    long study is kept and audited run by run); None when the study has no such run."""
    run = next((r for r in study.runs if r["job_id"] == job_id and r["kind"] == "job"), None)
    if run is None:
        return None
    row = jobs.get(job_id)
    answers = None
    if row is not None and row.status == "succeeded":
        found = RunFiles.for_job(row.id, storage).read_outcome(run["seed"], run_id=row.id)
        answers = found.questions if found is not None else None
    return run_record(run, row, answers)


def curves(spec: StudySpec, study: StudyRow, store: JobStore) -> Markup:
    """Every arm's held-out primary metric over steps, the mean of its seeds at each step
    that any of them evaluated: one SVG line per arm, ce first."""
    by_arm: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    metric = spec.primary
    key = f"{EVAL}{metric}"
    for run in study.runs:
        if run["kind"] != "job":
            continue
        for row in store.metrics(run["job_id"]):
            value = row.get(key)
            if (
                isinstance(value, int | float)
                and math.isfinite(value)
                and row.get("step") is not None
            ):
                by_arm[run["arm"]][int(row["step"])].append(float(value))
    series = [
        Series(
            name=label,
            points=[(step, sum(v) / len(v)) for step, v in sorted(by_arm[label].items())],
            color=PALETTE[i % len(PALETTE)],
            dashed=label == BASELINE,
        )
        for i, label in enumerate([BASELINE, *spec.labels()])
    ]
    title = f"{study.name}: held-out {metric}, mean over seeds"
    return line_chart(series, title, "step", metric)


def curves_file(spec: StudySpec, study: StudyRow, store: JobStore) -> str:
    """The chart as a standalone SVG document (an image a browser or a file viewer opens);
    before any run has evaluated, an image that says so."""
    chart = str(curves(spec, study, store))
    if not chart.startswith("<svg"):
        text = escape(f"{study.name}: no evaluated step yet")
        chart = f'<svg viewBox="0 0 640 40"><text x="8" y="24">{text}</text></svg>'
    # Outside the dashboard no stylesheet draws the axes and labels: the file carries its own.
    head, sep, body = chart.partition(">")
    return f"{head.replace('<svg ', f'<svg xmlns={SVG_NS!r} ', 1)}{sep}{STANDALONE_STYLE}{body}"
