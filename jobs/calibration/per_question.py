"""Per question, the calibration's figures that a study tests question by question: the K
samples, the calibrated 90 % interval measured out of sample (cross-conformal, exactly the
intervals `LevelReport.calibrated` summarises, so the mean of the scores here is its
`winkler_mean`), its interval score, and the samples' CRPS (jobs/infer/scores.py).

The end-of-job hook writes them beside calibration.json as `QUESTIONS_FILE`; the service
joins them to the run's predictions by `index` (the question's place in the held-out set).
"""

from __future__ import annotations

from collections.abc import Sequence

from jobs.calibration.conformal import (
    conformal_quantile,
    fold_ids,
    interval_at,
    out_of_sample_t,
    score,
)
from jobs.calibration.record import FOLDS, Observation, QuestionCalibration
from jobs.infer.scores import crps, interval_score

LEVEL = 0.9
ALPHA = 1 - LEVEL


def question_figures(
    observations: Sequence[Observation], period: float | None, folds: int = FOLDS
) -> list[QuestionCalibration]:
    """One record per observation, in their order (an observation without `index`: its
    place among them)."""
    groups = fold_ids(len(observations), folds)  # the folds `calibrate` measures with
    scores = [score(o.samples, o.answer, period) for o in observations]
    fitted = conformal_quantile(scores, LEVEL) is not None
    held = out_of_sample_t(scores, LEVEL, groups) if fitted else []
    out = []
    for i, obs in enumerate(observations):
        interval = interval_at(obs.samples, held[i], period) if held else None
        scored = None if interval is None else interval_score(interval, obs.answer, ALPHA, period)
        out.append(
            QuestionCalibration(
                index=i if obs.index is None else obs.index,
                samples=list(obs.samples),
                interval_90=interval,
                interval_score_90=scored,
                crps=crps(obs.samples, obs.answer, period),
            )
        )
    return out
