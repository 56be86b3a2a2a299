"""What `/v1/predict` adds from a version's calibration (jobs/calibration/conformal.py), and the
body of the on-demand `/v1/calibrate`.

The interval: when the version carries a calibration measured with the request's K
(`samples`) and temperature, and has a nested parameter t for its `interval_mass`, the
served interval is I_t of jobs/calibration/conformal.py (the sampled interval of mass t, widened by
t − 1 past t = 1) and the prediction says `calibrated: true`; otherwise the sampled
interval of the nominal mass is served, `calibrated: false`, and the response's
`calibration.note` says why. `measured_coverage` is the served interval's coverage measured
out of sample (cross-conformal) with its Wilson 95 % interval, and `wide` flags an interval
whose median width on those questions exceeds WIDE_RELATIVE_WIDTH times the answer
(jobs/calibration/record.py).

The point estimate (`estimate`): greedy, expected and median_decoding are the number of
the text under that decoding; mean and median are the K samples' mean and median. `auto`
takes the estimator with the lowest measured MAE among those the request can give (its
decoding's own, and mean/median when it samples); without a calibration it is the
number of the text. Left out, `estimate` is the number of the text, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from jobs.calibration.conformal import best_of, mass_and_margin, widen
from jobs.calibration.record import WIDE_NOTE, Calibration, IntervalReport
from jobs.infer import Prediction
from service import errors

Estimate = Literal["greedy", "mean", "median", "expected", "median_decoding", "auto"]
# The decoding whose text gives each one-pass estimator's number.
DECODING_OF = {"greedy": "greedy", "expected": "expected", "median_decoding": "median"}
SAMPLED = ("mean", "median")


class ServedPrediction(Prediction):
    estimate: float | None  # the chosen point estimate
    estimator: str  # which one it is
    calibrated: bool  # interval is the version's calibrated one for interval_mass


class ServedCalibration(BaseModel):
    calibrated: bool  # the intervals of this response are the version's calibrated ones
    note: str | None = None  # why not, when not; or why the coverage is not measured
    n: int | None = None  # questions it was measured on
    source: str | None = None
    method: str | None = None  # how coverage was measured ("cross-conformal, 5 folds")
    nested_parameter: float | None = None  # t: I_t is served for the nominal interval_mass
    sample_mass: float | None = None  # the samples' central mass asked for: min(t, 1)
    margin: float | None = None  # answer units added on each side: max(t − 1, 0)
    measured_coverage: float | None = None  # the served interval's, out of sample
    measured_coverage_low: float | None = None  # its Wilson 95 % interval
    measured_coverage_high: float | None = None
    uncalibrated_coverage: float | None = None  # the sampled interval's, on the same questions
    relative_width_median: float | None = None  # served interval's width / max(|answer|, 1)
    wide: bool | None = None  # relative_width_median > WIDE_RELATIVE_WIDTH
    wide_note: str | None = None  # what `wide` means, when it is set


class CalibrateExample(BaseModel):
    prompt: str = Field(min_length=1, max_length=4000)
    answer: str = Field(min_length=1, max_length=100)


class CalibrateRequest(BaseModel):
    model_config = {"extra": "forbid"}

    model: str = Field(min_length=1, max_length=140)
    examples: list[CalibrateExample] | None = Field(
        None, min_length=1, max_length=5000, description="else the job's held-out split"
    )
    questions: int = Field(200, ge=1, le=5000, description="at most this many")
    samples: int = Field(16, ge=2, le=256)
    max_new_tokens: int = Field(16, ge=1, le=512)


def choose_estimator(
    asked: str | None, decoding: str, decoding_given: bool, samples: int, record: Calibration | None
) -> tuple[str, str]:
    """(estimator, decoding to run); errors.InvalidRequest naming `estimate` on a conflict."""
    text_number = next(k for k, v in DECODING_OF.items() if v == decoding)
    if asked is None:
        return text_number, decoding
    if asked == "auto":
        if record is None:
            return text_number, decoding
        allowed = [text_number] if decoding_given else list(DECODING_OF)
        allowed += list(SAMPLED) if samples > 0 else []
        mine = {k: r for k, r in record.estimators.items() if k in allowed}
        asked = best_of(mine) or text_number
    if asked in SAMPLED:
        if samples == 0:
            raise errors.InvalidRequest(f"estimate: {asked} is of the K samples; give samples ≥ 1")
        return asked, decoding
    needed = DECODING_OF[asked]
    if decoding_given and needed != decoding:
        raise errors.InvalidRequest(
            f"estimate: {asked} is the number of the {needed!r} decoding, but decoding is "
            f"{decoding!r}; leave decoding out or make them agree"
        )
    return asked, needed


@dataclass
class Plan:
    """One /v1/predict request against one version: what to run and how to present it."""

    estimator: str
    options: dict[str, Any]  # keyword arguments of NumericPredictor.predict
    calibration: ServedCalibration
    margin: float  # widen each interval by this (I_t past t = 1)
    period: float | None
    nominal_mass: float


def plan(body: Any, record: Calibration | None) -> Plan:
    """For a PredictRequest on a version with this calibration; 422 naming `estimate`."""
    estimator, decoding = choose_estimator(
        body.estimate, body.decoding, "decoding" in body.model_fields_set, body.samples, record
    )
    # The images travel beside the options (Work.images), decoded and checked.
    exclude = {"model", "prompts", "images", "estimate"}
    options = {**body.model_dump(exclude=exclude), "decoding": decoding}
    info, t = _applicable(record, body.samples, body.temperature, body.interval_mass)
    margin = 0.0
    if t is not None:
        options["interval_mass"], margin = mass_and_margin(t)
    period = record.period if record is not None else None
    return Plan(estimator, options, info, margin, period, body.interval_mass)


def served(predictions: list[Prediction], how: Plan) -> list[ServedPrediction]:
    """The predictions with their estimate and, when it applies, calibrated interval."""
    out = []
    for p in predictions:
        value = {"mean": p.expected_value, "median": p.median}.get(how.estimator, p.value)
        interval = p.interval
        if how.margin > 0:
            interval = widen(p.interval, p.expected_value, how.margin, how.period)
        out.append(ServedPrediction(**{
            **p.model_dump(), "interval": interval, "interval_mass": how.nominal_mass,
            "estimate": value, "estimator": how.estimator,
            "calibrated": how.calibration.calibrated and interval is not None,
        }))  # fmt: skip
    return out


def _applicable(
    record: Calibration | None, samples: int, temperature: float, mass: float
) -> tuple[ServedCalibration, float | None]:
    if record is None:
        return ServedCalibration(calibrated=False, note="this version has no calibration"), None
    level = next((r for r in record.levels if abs(r.level - mass) < 1e-9), None)
    base: dict[str, Any] = {"n": record.n, "source": record.source, "method": record.method}
    if samples != record.samples or abs(temperature - record.temperature) > 1e-9:
        note = (
            f"calibrated for samples={record.samples}, temperature={record.temperature:g}; "
            f"this request has samples={samples}, temperature={temperature:g}"
        )
        return ServedCalibration(calibrated=False, note=note, **base), None
    if level is None or level.nested_parameter is None:
        masses = ", ".join(f"{r.level:g}" for r in record.levels if r.nested_parameter is not None)
        note = f"no calibrated interval for interval_mass={mass:g}; calibrated: {masses}"
        sampled = (
            {}
            if level is None
            else {**_quoted(level.sampled), "uncalibrated_coverage": level.sampled.coverage}
        )  # the sampled interval is the one served: what its measurement says
        return ServedCalibration(calibrated=False, note=note, **base, **sampled), None
    unmeasured: str | None = None
    if level.calibrated is None:
        unmeasured = (
            f"coverage not measured out of sample (a layout-{record.layout} record; in-sample "
            f"coverage {level.in_sample_coverage}); recalibrate to measure it"
        )
    return ServedCalibration(
        calibrated=True, note=unmeasured, nested_parameter=level.nested_parameter,
        sample_mass=level.sample_mass, margin=level.margin,
        uncalibrated_coverage=level.sampled.coverage,
        **base, **(_quoted(level.calibrated) if level.calibrated is not None else {}),
    ), level.nested_parameter  # fmt: skip


def _quoted(report: IntervalReport) -> dict[str, Any]:
    """What a response quotes of the served interval's measurement."""
    return {
        "measured_coverage": report.coverage,
        "measured_coverage_low": report.coverage_low,
        "measured_coverage_high": report.coverage_high,
        "relative_width_median": report.relative_width_median,
        "wide": report.wide,
        "wide_note": WIDE_NOTE if report.wide else None,
    }
