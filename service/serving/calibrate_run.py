"""/v1/calibrate as turns of work, like /v1/predict's: the questions run in slices, and each
model call of a slice (its greedy, expected and median passes, and its samples, drawn in
pieces) is a turn of its own at the replica's compute of at most TURN_TOKENS token
positions, under the request time limit. Other owners' calls take their turns between
them: one of them waits for a turn of about a second or two, not for a slice as large as a
whole predict request (26-50 s on SmolLM2 before: issue 45, H1). The whole run has a
token budget and a time limit of its own, and stops at the next slice once the client has
gone: nothing is stored then.
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
# Token positions (rows × (longest prompt + new tokens)) one turn of a calibration may
# generate: on SmolLM2-135M and 2 loaded cores about 2 s (a 13.9k-position slice took 26 s).
TURN_TOKENS = 1024


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
    return max(1, min(config.max_request_tokens, TURN_TOKENS) // per_question)


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
        if time.monotonic() >= deadline:
            raise expired(config)
        chunk = rows[start : start + size]
        width = max(lengths[start : start + size]) + body.max_new_tokens
        in_turns = TurnTaking(predictor, turn, width, config, deadline)
        observations += await asyncio.to_thread(
            observe, in_turns, chunk, samples=body.samples,  # type: ignore[arg-type]
            max_new_tokens=body.max_new_tokens, batch_size=len(chunk), seed=start,
        )  # fmt: skip
    if not observations:
        raise errors.InvalidRequest("examples: no question has a numeric answer to calibrate on")
    return calibrate(
        observations, samples=body.samples, temperature=1.0, period=predictor.period,
        source=source,
    )  # fmt: skip


def expired(config: ServeConfig) -> RequestTimedOut:
    return RequestTimedOut(
        f"calibration ran past {config.calibrate_timeout_s:g} s"
        " (NUMTUNE_SERVE_CALIBRATE_TIMEOUT_S); ask for fewer questions or samples"
    )


class TurnTaking:
    """The predictor as observe() calls it: each model call in the owner's turn, cut at the
    request time limit or the run's deadline (RequestTimedOut then); a sampled pass of
    more than TURN_TOKENS positions (`width`: longest prompt + new tokens, per row) is drawn
    in pieces, each a turn. The samples are independent draws, so the pieces together are
    K samples as one pass is; piece j > 0 is seeded seed + j·2³²."""

    def __init__(
        self, predictor: NumericPredictor, turn: Turn, width: int, config: ServeConfig,
        deadline: float,
    ) -> None:  # fmt: skip
        self.predictor, self.turn, self.width = predictor, turn, width
        self.config, self.deadline = config, deadline

    def __getattr__(self, name: str) -> Any:
        return getattr(self.predictor, name)  # parse, period: no model call

    def predict(self, prompts: list[str], **options: Any) -> Any:
        return self._in_turn(self.predictor.predict, prompts, **options)

    def sampled_numbers(
        self, prompts: list[str], *, samples: int, seed: int | None = None, **options: Any
    ) -> list[list[float]]:
        piece = max(1, TURN_TOKENS // (len(prompts) * self.width))
        out: list[list[float]] = [[] for _ in prompts]
        for j, first in enumerate(range(0, samples, piece)):
            drawn = self._in_turn(
                self.predictor.sampled_numbers, prompts, samples=min(piece, samples - first),
                seed=None if seed is None else seed + (j << 32), **options,
            )  # fmt: skip
            for row, values in zip(out, drawn, strict=True):
                row.extend(values)
        return out

    def _in_turn(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with self.turn():
            began = time.monotonic()
            left = self.deadline - began
            limit = min(left, self.config.request_timeout_s)
            if limit > 0:
                with self.predictor.time_limit(limit):
                    out = call(*args, **kwargs)
            if time.monotonic() - began >= limit:  # cut short: not answers
                if limit == left:
                    raise expired(self.config)
                raise RequestTimedOut(
                    f"a calibration turn ran past its {limit:g} s limit"
                    " (NUMTUNE_SERVE_REQUEST_TIMEOUT_S); ask for fewer samples or new tokens"
                )
        return out
