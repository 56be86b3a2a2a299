"""Each arm's decoding in a study's result: the one it is judged by, and for
`best_on_validation` the one its runs scored best with on their validation rows (the training
rows they held out, jobs/spec/study_decoding.py), read from each run's decodings.json. The
held-out test questions take no part in the choice: only `DecodingScores.validation` is read.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from pydantic import BaseModel, Field

from jobs.records.models import DecodingsRecord
from jobs.records.run_files import RunFiles
from jobs.spec import BASELINE, HIGHER_IS_BETTER, StudySpec
from jobs.spec.decoding import BEST_ON_VALIDATION, SCORED_DECODINGS
from jobs.spec.study_decoding import declared
from service.store import JobRow, StudyRow


class ArmDecoding(BaseModel):
    """How one arm's runs are judged."""

    decoding: str = Field(description="the decoding its metrics and answers are read under")
    declared: str | None = Field(description="as the spec declared it; None: the base's own")
    metric: str | None = Field(None, description="best_on_validation: the metric it chose by")
    validation: dict[str, float | None] = Field(
        default_factory=dict,
        description="best_on_validation: per candidate, the mean over the arm's runs of "
        "that metric on their validation rows",
    )
    runs: int = Field(0, description="best_on_validation: the runs whose validation it read")
    note: str | None = None


def selection_metric(spec: StudySpec) -> str:
    """The primary metric a decoding is chosen by (the first, when several are declared)."""
    primary: Any = spec.primary_metric
    return primary if isinstance(primary, str) else str(primary[0])


def validation_means(records: list[DecodingsRecord], metric: str) -> dict[str, float | None]:
    """Per candidate decoding, the mean of `metric` over the runs' validation rows (None
    where a run has no such figure, e.g. an MAE with nothing parsed)."""
    # The run's own decoding first, then in the catalogue's order: ties go to the earlier.
    order = [records[0].primary, *SCORED_DECODINGS]
    names = [n for n in dict.fromkeys(order) if all(n in r.scores for r in records)]
    out: dict[str, float | None] = {}
    for name in names:
        values = [(r.scores[name].validation or {}).get(metric) for r in records]
        finite = [v for v in values if v is not None and math.isfinite(v)]
        out[name] = statistics.fmean(finite) if len(finite) == len(values) else None
    return out


def best(means: dict[str, float | None], higher: bool) -> str | None:
    """The candidate with the best mean; ties go to the earlier one (the base's own first)."""
    ranked = [
        (v if higher else -v, -i, name)
        for i, (name, v) in enumerate(means.items())
        if v is not None
    ]
    return max(ranked)[2] if ranked else None


def choose(spec: StudySpec, label: str, records: list[DecodingsRecord]) -> ArmDecoding:
    """The arm's decoding from its runs' decodings.json (validation scores only)."""
    own = spec.base.train.eval_decoding
    asked = declared(spec, label)
    if asked is None or asked != BEST_ON_VALIDATION:
        return ArmDecoding(decoding=asked or own, declared=asked)
    metric = selection_metric(spec)
    held = [r for r in records if r.validation_rows > 0]
    if held and metric not in (next(iter(held[0].scores.values())).validation or {}):
        # A metric the decodings do not change (the calibrated interval's): choose by closeness.
        metric = "mae" if not HIGHER_IS_BETTER.get(metric, True) else "exact_match"
    means = validation_means(held, metric) if held else {}
    chosen = best(means, HIGHER_IS_BETTER.get(metric, True))
    if chosen is None:
        return ArmDecoding(
            decoding=own, declared=asked, metric=metric, validation=means, runs=len(held),
            note=f"no run has validation scores to choose by: judged by {own}",
        )  # fmt: skip
    return ArmDecoding(
        decoding=chosen, declared=asked, metric=metric, validation=means, runs=len(held)
    )


def arm_decodings(
    spec: StudySpec, study: StudyRow, jobs: dict[str, JobRow], storage: str
) -> dict[str, ArmDecoding]:
    """Every arm's decoding, ce first, from its succeeded runs."""
    records: dict[str, list[DecodingsRecord]] = {}
    for run in study.runs:
        row = jobs.get(run["job_id"])
        if run["kind"] != "job" or row is None or row.status != "succeeded":
            continue
        found = RunFiles.for_job(row.id, storage).read_decodings()
        if found is not None:
            records.setdefault(run["arm"], []).append(found)
    return {
        label: choose(spec, label, records.get(label, [])) for label in [BASELINE, *spec.labels()]
    }


def read_under(spec: StudySpec, label: str, choice: ArmDecoding | None) -> str | None:
    """The decoding to read an arm's runs under: None (the run's own files, as before
    per-arm decodings) where the study declared none for it."""
    return None if choice is None or declared(spec, label) is None else choice.decoding


def name_arms(comparison: dict[str, Any] | None, chosen: dict[str, ArmDecoding]) -> None:
    """Each arm of a dumped comparison names its decoding (`decoding`), in place."""
    for arm in (comparison or {}).get("arms", []):
        if arm.get("arm") in chosen:
            arm["decoding"] = chosen[arm["arm"]].decoding
