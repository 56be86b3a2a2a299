"""What jobs/infer/ answers with: a numeric prediction, a plain completion, and the error
for an argument out of range (the API turns it into a 422 naming the argument)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel

from jobs.spec import DataSpec

Decoding = Literal["greedy", "expected", "median"]
TASKS: tuple[str, ...] = get_args(DataSpec.model_fields["task"].annotation)


class InferenceRequestError(ValueError):
    """An argument of predict/complete/stream is out of range; the message names it."""


class Prediction(BaseModel):
    text: str  # greedy (or numeric-decoded) completion: its first line, stripped
    value: float | None  # number parsed from text (minutes since midnight for clock)
    value_reason: str | None  # why value is None
    expected_value: float | None  # mean of the K samples' parsed numbers
    median: float | None = None  # their median (circular for clock: jobs/calibration/conformal.py)
    std: float | None  # their population standard deviation
    interval: tuple[float, float] | None  # central `interval_mass` quantile interval
    interval_mass: float
    samples: int  # K asked
    parsed_samples: int  # how many of the K gave a number
    # Those numbers themselves (the dashboard draws their histogram); empty when K = 0.
    sampled_values: list[float] = []
    tokens: list[str]  # text pieces of the generated tokens up to the end of `text`'s line


class Completion(BaseModel):
    text: str  # everything generated before end-of-sequence, unstripped
    finish_reason: Literal["stop", "length"]  # stop: the model ended it; length: budget spent
    prompt_tokens: int
    completion_tokens: int  # generated tokens, the end-of-sequence token included


def check(ok: bool, message: str) -> None:
    if not ok:
        raise InferenceRequestError(message)
