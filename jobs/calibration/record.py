"""The calibration record a model version carries (jobs/calibration/conformal.py computes it).

Imports only pydantic and math: the control plane reads and shows it without torch.

Layout 2 (this one) says what each number is: `nested_parameter` is t of the nested
intervals I_t (not a probability mass), split into the `sample_mass` the predictor is asked
for and the `margin` in answer units added on each side; `calibrated` is measured out of
sample (cross-conformal). Layout 1 records (before issue 33: `calibrated_mass`, and a
`calibrated_coverage` measured on the questions t was fitted on) are read and upgraded by
`Calibration`'s validator: their t is kept, nothing out of sample is invented.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from pydantic import BaseModel, Field, ValidationError, computed_field, model_validator

log = logging.getLogger(__name__)

CALIBRATION_FILE = "calibration.json"  # in a checkpoint folder, copied onto the version
QUESTIONS_FILE = "calibration_questions.jsonl"  # beside it: one QuestionCalibration a line
LEVELS: tuple[float, ...] = (0.5, 0.8, 0.9, 0.95)  # nominal masses measured and corrected
ESTIMATORS: tuple[str, ...] = ("greedy", "mean", "median", "expected", "median_decoding")
FOLDS = 5  # cross-conformal folds over the held-out questions (fewer when n < 5)
# An interval whose median width exceeds this many times the answer's size (|answer|, at
# least 1; a day for clock answers) is flagged `wide`: at 1.0 a typical interval is as wide
# as the number it is about, e.g. [50, 150] around 100.
WIDE_RELATIVE_WIDTH = 1.0
WIDE_NOTE = "wide: the model is unsure — treat as a range, not an answer"
MIN_MASS = 1e-9  # the predictor takes masses in (0, 1]
HAIR = 1e-9  # added to t: an answer exactly at I_t's end, as scored, stays inside


def mass_and_margin(t: float) -> tuple[float, float]:
    """I_t as (mass of the sampled interval to ask for, margin to widen it by)."""
    t += HAIR
    return min(max(t, MIN_MASS), 1.0), max(t - 1.0, 0.0)


def wilson(hits: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval (95 % by default) of a binomial share hits / n; (0, 1) for n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # Clamped to hold p itself: at p = 0 or 1 rounding can leave an end a hair inside.
    return max(0.0, min(centre - half, p)), min(1.0, max(centre + half, p))


class Observation(BaseModel):
    index: int | None = None  # the question's place in the held-out set, where known
    answer: float  # the true number (minutes since midnight for clock)
    greedy: float | None  # number of the greedy completion
    expected: float | None  # of the `expected` numeric decoding
    median_decoding: float | None  # of the `median` numeric decoding
    samples: list[float]  # numbers parsed from the K sampled completions (≤ K of them)


class QuestionCalibration(BaseModel):
    """One calibrated question as `QUESTIONS_FILE` keeps it (jobs/calibration/per_question.py):
    what a study's per-question tests of interval_score_90 and crps resample."""

    index: int = Field(description="the question's place in the job's held-out set")
    samples: list[float] = Field(description="the numbers of its K sampled answers")
    interval_90: tuple[float, float] | None = Field(
        description="the calibrated 90 % interval, t fitted on the other folds (as "
        "`calibrated` measures it); null: no sample parsed, or the level is uncalibrated"
    )
    interval_score_90: float | None = Field(description="its Winkler score (α = 0.1)")
    crps: float | None = Field(description="the samples' CRPS at the answer; null: none")


class IntervalReport(BaseModel):
    """One way of drawing the interval, measured on `n` questions it was not fitted on."""

    n: int = Field(description="questions measured (every one counts for coverage)")
    coverage: float = Field(description="share of answers inside their interval")
    coverage_low: float = Field(description="Wilson 95 % interval of `coverage`: low end")
    coverage_high: float = Field(description="Wilson 95 % interval of `coverage`: high end")
    with_interval: int | None = Field(
        description="questions that had an interval at all (none: no sample parsed as a "
        "number); widths and scores are over these; null in records of layout 1"
    )
    width_mean: float | None = Field(description="mean width, in answer units")
    relative_width_mean: float | None = Field(
        description="mean of width / max(|answer|, 1) (width / 1440 for clock answers)"
    )
    relative_width_median: float | None = Field(description="median of the same ratio")
    winkler_mean: float | None = Field(
        description="mean interval (Winkler) score at the nominal level m: width + "
        "2 / (1 − m) × the distance from the interval to an answer outside it; lower is "
        "better, in answer units"
    )

    @computed_field(  # type: ignore[prop-decorator]
        description=f"relative_width_median > {WIDE_RELATIVE_WIDTH:g}: {WIDE_NOTE}"
    )
    @property
    def wide(self) -> bool | None:
        m = self.relative_width_median
        return None if m is None else m > WIDE_RELATIVE_WIDTH


class LevelReport(BaseModel):
    level: float = Field(description="nominal mass m of the interval asked for")
    sampled: IntervalReport = Field(
        description="the K samples' central interval of mass m as sampled (nothing fitted)"
    )
    nested_parameter: float | None = Field(
        description="t of the nested intervals I_t (jobs/calibration/conformal.py) fitted by split "
        "conformal on all n questions: I_t is served for nominal mass m. Not a probability "
        "mass: below 1 it is the samples' central mass, past 1 the samples' range widened "
        "by t − 1 answer units on each side. Null: too few questions for this level"
    )
    calibrated: IntervalReport | None = Field(
        description="I_t measured out of sample (cross-conformal: each question's t fitted "
        "on the other folds); null when not calibrated or in a layout-1 record"
    )
    in_sample_coverage: float | None = Field(
        None,
        description="I_t's coverage on the very questions t was fitted on: near m by "
        "construction, not a measurement; kept for comparison",
    )

    @computed_field(description="probability mass of the samples' central interval asked for")  # type: ignore[prop-decorator]
    @property
    def sample_mass(self) -> float | None:
        t = self.nested_parameter
        return None if t is None else mass_and_margin(t)[0]

    @computed_field(description="answer units added on each side of the samples' range")  # type: ignore[prop-decorator]
    @property
    def margin(self) -> float | None:
        t = self.nested_parameter
        return None if t is None else mass_and_margin(t)[1]


class EstimatorReport(BaseModel):
    mae: float | None = Field(description="mean |estimate − answer| over questions answered")
    median_rel_error: float | None = Field(
        description="median |estimate − answer| / max(|answer|, 1)"
    )
    exact_match: float = Field(description="share with estimate == answer (missing: a miss)")
    answered: float = Field(description="share with an estimate at all")


class Calibration(BaseModel):
    """What a model version carries: measured on `n` held-out questions with K = `samples`
    samples at `temperature`; served intervals are corrected only for those settings."""

    layout: int = Field(2, description="2: out-of-sample coverage; 1: an older record")
    n: int = Field(description="held-out questions measured")
    samples: int = Field(description="K sampled completions per question")
    temperature: float
    period: float | None = Field(description="1440 for clock answers")
    source: str = Field(description='"held-out split of the job", or where the rows came from')
    method: str = Field(
        "in-sample (layout 1)", description="how `calibrated` was measured out of sample"
    )
    folds: int | None = Field(None, description="cross-conformal folds; null in layout 1")
    levels: list[LevelReport]
    estimators: dict[str, EstimatorReport]
    best: str = Field(description="lowest MAE among those answering most often")

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        """A layout-1 record (levels with `calibrated_mass`) in this layout."""
        if not isinstance(data, dict) or "layout" in data:
            return data
        levels = data.get("levels")
        if not isinstance(levels, list) or not any(
            isinstance(r, dict) and "calibrated_mass" in r for r in levels
        ):
            return data
        n = data.get("n")
        n = n if isinstance(n, int) else 0
        return {**data, "layout": 1, "levels": [_old_level(r, n) for r in levels]}


def _old_level(old: Any, n: int) -> Any:
    if not isinstance(old, dict) or "calibrated_mass" not in old:
        return old  # not layout 1 either: let validation name what is wrong
    coverage = float(old["coverage"])
    low, high = wilson(round(coverage * n), n)
    return {
        "level": old["level"],
        "sampled": {
            "n": n, "coverage": coverage, "coverage_low": low, "coverage_high": high,
            "with_interval": None, "width_mean": old.get("width"),
            "relative_width_mean": None, "relative_width_median": None, "winkler_mean": None,
        },
        "nested_parameter": old["calibrated_mass"],
        "calibrated": None,
        "in_sample_coverage": old.get("calibrated_coverage"),
    }  # fmt: skip


def read_record(raw: Any) -> Calibration | None:
    """A stored record in either layout; None (and a warning) for an unreadable one."""
    if not raw:
        return None
    try:
        return Calibration.model_validate(raw)
    except ValidationError as error:
        log.warning("unreadable calibration record ignored: %s", error)
        return None
