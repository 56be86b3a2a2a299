"""/v1/calibrate as turns of work, like /v1/predict's: the questions run in slices, each
no larger than one predict request may be (NUMTUNE_SERVE_MAX_REQUEST_TOKENS), each in the
owner's turn at the replica's compute and under the request time limit, so other owners'
calls take their turns between slices. The whole run has a token budget and a time limit
of its own, and stops at the next slice once the client has gone: nothing is stored then.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from pydantic import ValidationError

from jobs.calibration.conformal import Observation, calibrate
from jobs.calibration.held_out import HELD_OUT, observe
from jobs.calibration.record import Calibration
from jobs.data import DataError, Example, load_task
from jobs.infer import NumericPredictor
from jobs.spec import DataSpec
from service import errors
from service.serving.api import ServeConfig
from service.serving.calibration import CalibrateRequest
from service.serving.limits import RequestTimedOut, check_budget

log = logging.getLogger(__name__)
DECODINGS = 3  # greedy, expected and median passes per question, before the samples
Turn = Callable[[], AbstractContextManager[None]]


class ClientGone(errors.APIError):
    status, code = 499, "client_closed_request"


def calibration_rows(body: CalibrateRequest, spec: dict[str, Any]) -> tuple[list[Example], str]:
    """The request's examples, else the version's job's held-out split; and their source."""
    if body.examples is not None:
        rows = [Example(e.prompt, e.answer) for e in body.examples]
        return rows[: body.questions], f"{len(rows)} examples given on request"
    try:
        rows = load_task(DataSpec.model_validate(spec.get("data") or {})).eval
    except (DataError, ValidationError, OSError) as error:
        raise errors.InvalidRequest(
            f"examples: the job's held-out split cannot be read ({error}); give examples"
        ) from error
    return rows[: body.questions], HELD_OUT


def slice_size(
    config: ServeConfig, lengths: Sequence[int], samples: int, new: int, field: str
) -> int:
    """Questions per slice: as many as one predict request may hold. 422 (naming the
    field) for a prompt over the prompt limit, a question that alone is over the request
    budget, or a run over the calibration budget."""
    rows = DECODINGS + samples
    for i, n in enumerate(lengths):
        check_budget(config, [n], rows_per_prompt=rows, max_new_tokens=new, field=f"{field}[{i}]")
    per_question = rows * (max(lengths) + new)
    total = len(lengths) * per_question
    if total > config.max_calibrate_tokens:
        raise errors.InvalidRequest([{"field": "budget", "message": (
            f"{len(lengths)} question(s) × {rows} row(s) × ({max(lengths)} prompt + {new} new"
            f" tokens) = {total} exceeds the calibration budget of {config.max_calibrate_tokens}"
            " (NUMTUNE_SERVE_MAX_CALIBRATE_TOKENS); ask for fewer questions, samples or new tokens"
        )}])  # fmt: skip
    return max(1, config.max_request_tokens // per_question)


async def calibrate_in_slices(
    body: CalibrateRequest,
    predictor: NumericPredictor,
    spec: dict[str, Any],
    *,
    config: ServeConfig,
    turn: Turn,
    gone: Callable[[], Awaitable[bool]],
) -> Calibration:
    """The calibration record; `turn()` takes the owner's compute turn, `gone()` says
    whether the client has left (checked before every slice)."""
    rows, source = calibration_rows(body, spec)
    field = "examples" if body.examples is not None else "questions"
    lengths = predictor.prompt_tokens([r.prompt for r in rows], chat=True)
    size = slice_size(config, lengths, body.samples, body.max_new_tokens, field)
    deadline = time.monotonic() + config.calibrate_timeout_s
    observations: list[Observation] = []
    for start in range(0, len(rows), size):
        if await gone():
            log.info("calibration stopped after %d of %d questions: client gone", start, len(rows))
            raise ClientGone("the client closed the request; nothing was stored")
        left = deadline - time.monotonic()
        if left <= 0:
            raise RequestTimedOut(
                f"calibration ran past {config.calibrate_timeout_s:g} s"
                " (NUMTUNE_SERVE_CALIBRATE_TIMEOUT_S); ask for fewer questions or samples"
            )
        chunk = rows[start : start + size]
        limit = min(left, config.request_timeout_s)
        observations += await asyncio.to_thread(_slice, predictor, chunk, body, start, limit, turn)
    if not observations:
        raise errors.InvalidRequest("examples: no question has a numeric answer to calibrate on")
    return calibrate(
        observations, samples=body.samples, temperature=1.0, period=predictor.period,
        source=source,
    )  # fmt: skip


def _slice(
    predictor: NumericPredictor,
    chunk: list[Example],
    body: CalibrateRequest,
    start: int,
    limit_s: float,
    turn: Turn,
) -> list[Observation]:
    """One slice in the owner's turn, cut at `limit_s` (RequestTimedOut then)."""
    with turn():
        began = time.monotonic()
        with predictor.time_limit(limit_s):
            out = observe(
                predictor, chunk, samples=body.samples, max_new_tokens=body.max_new_tokens,
                batch_size=len(chunk), seed=start,
            )  # fmt: skip
        if time.monotonic() - began >= limit_s:
            raise RequestTimedOut(
                f"a calibration slice ran past its {limit_s:g} s limit; ask for fewer samples"
                " or new tokens"
            )
    return out
