"""The calibration record a model version carries (jobs/calibration.py computes it).

Imports only pydantic: the control plane reads and shows it without torch.
"""

from __future__ import annotations

from pydantic import BaseModel

CALIBRATION_FILE = "calibration.json"  # in a checkpoint folder, copied onto the version
LEVELS: tuple[float, ...] = (0.5, 0.8, 0.9, 0.95)  # nominal masses measured and corrected
ESTIMATORS: tuple[str, ...] = ("greedy", "mean", "median", "expected", "median_decoding")


class Observation(BaseModel):
    answer: float  # the true number (minutes since midnight for clock)
    greedy: float | None  # number of the greedy completion
    expected: float | None  # of the `expected` numeric decoding
    median_decoding: float | None  # of the `median` numeric decoding
    samples: list[float]  # numbers parsed from the K sampled completions (≤ K of them)


class LevelReport(BaseModel):
    level: float  # nominal mass m
    coverage: float  # share of answers inside the uncalibrated interval
    width: float  # its mean width (an interval-less question counts as width 0)
    # The calibrated mass t (I_t, jobs/calibration.py); None: too few questions for this level.
    calibrated_mass: float | None
    calibrated_coverage: float | None  # on the calibration set itself (in-sample)
    calibrated_width: float | None


class EstimatorReport(BaseModel):
    mae: float | None  # mean |estimate − answer| over questions with an estimate
    median_rel_error: float | None  # median |estimate − answer| / max(|answer|, 1)
    exact_match: float  # share with estimate == answer (a missing estimate is a miss)
    answered: float  # share with an estimate at all


class Calibration(BaseModel):
    """What a model version carries: measured on `n` held-out questions with K = `samples`
    samples at `temperature`; served intervals are corrected only for those settings."""

    n: int
    samples: int
    temperature: float
    period: float | None  # 1440 for clock answers
    source: str  # which questions: "held-out split of the job", or a file's name
    levels: list[LevelReport]
    estimators: dict[str, EstimatorReport]
    best: str  # lowest MAE among those answering most often (greedy when none answers)
