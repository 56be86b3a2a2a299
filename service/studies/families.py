"""What a study's comparison tests and what its verdicts rest on.

Families: the primaries (Holm) and the registered secondary family (Benjamini–Hochberg) come
from the spec; every other figure the runs report is tested as exploratory, raw p only. With
no `secondary_metrics` declared the default family keeps only the figures some run measured
(an uncalibrated study has no interval to test); a declared family is kept whole, its
unmeasured members reported as such.

Footing: the budget (base.train.steps), whether ce's learning rate was swept with the arms'
budget (`tune_lr`), and whether ce was still improving at the end, from its runs' curves.
"""

from __future__ import annotations

from typing import get_args

from jobs.records.run_files import RunFiles
from jobs.spec import HIGHER_IS_BETTER, StudySpec
from jobs.spec.metrics import TestedMetric
from jobs.spec.study_sweeps import BASELINE
from jobs.stats import Footing, RunOutcome
from jobs.stats.footing import still_rising
from service.store import JobRow, StudyRow

TESTED: tuple[str, ...] = get_args(TestedMetric)
EVAL = "eval_"


def families(spec: StudySpec, arms: dict[str, list[RunOutcome]]) -> tuple[list[str], list[str]]:
    """(secondary, exploratory) metrics of the study's comparison."""
    measured = {
        m for runs in arms.values() for r in runs for m, v in r.metrics.items() if v is not None
    }
    secondary = spec.secondaries
    if spec.secondary_metrics is None:
        secondary = [m for m in secondary if m in measured]
    tested = {*spec.primaries, *secondary}
    return secondary, [m for m in TESTED if m in measured and m not in tested]


def _curve(row: JobRow, storage: str, metric: str) -> dict[int, float]:
    rows = RunFiles.for_job(row.id, storage).read_metrics()
    out = {}
    for line in rows:
        value = line.as_dict().get(f"{EVAL}{metric}")
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[line.step] = float(value)
    return out


def footing(spec: StudySpec, study: StudyRow, jobs: dict[str, JobRow], storage: str) -> Footing:
    """What the verdicts rest on besides their tests (module docstring). ce's curve is the
    first primary metric the runs evaluated along the way (the interval's and CRPS are
    measured only at the end), else exact match."""
    ce = [
        row
        for run in study.runs
        if run["kind"] == "job" and run["arm"] == BASELINE
        and (row := jobs.get(run["job_id"])) is not None and row.status == "succeeded"
    ]  # fmt: skip
    rising, detail = None, None
    for metric in [*spec.primaries, "exact_match"]:
        curves = [c for row in ce if (c := _curve(row, storage, metric))]
        if curves and len(curves) == len(ce):
            rising, detail = still_rising(curves, metric, HIGHER_IS_BETTER.get(metric, True))
            break
    return Footing(
        steps=spec.base.train.steps,
        baseline_tuned=spec.tune_lr is not None,
        baseline_rising=rising,
        rising_detail=detail,
    )
