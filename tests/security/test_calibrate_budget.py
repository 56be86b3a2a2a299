"""Issue 30 item 2 (H1): /v1/calibrate has predict's per-request budget, turn-taking and
time limit: the largest request is refused before any model work, a long calibration runs
in slices that let another owner's call through, and it stops when the client goes.
Real tiny model and the replica's FairTurns; no Ray."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from jobs.infer import NumericPredictor
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import ModelSpec
from service.errors import InvalidRequest
from service.serving.api import ServeConfig
from service.serving.calibrate_run import ClientGone, calibrate_in_slices
from service.serving.calibration import CalibrateRequest
from service.serving.limits import FairTurns, RequestTimedOut

SPEC: dict[str, object] = {}  # examples are given: the job's data is not read


@pytest.fixture(scope="module")
def predictor() -> NumericPredictor:
    model, tokenizer = load_model_and_tokenizer(ModelSpec(source="random:tiny-digit"))
    return NumericPredictor(model, tokenizer, use_chat_template=False)


def request(questions: int, samples: int, new: int) -> CalibrateRequest:
    examples = [{"prompt": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(questions)]
    return CalibrateRequest.model_validate(
        {"model": "m:1", "examples": examples, "questions": questions, "samples": samples,
         "max_new_tokens": new}
    )  # fmt: skip


async def never_gone() -> bool:
    return False


class Owner:
    """ann's turns at a replica's compute, counted."""

    def __init__(self, turns: FairTurns):
        self.turns, self.slices = turns, 0

    @contextmanager
    def turn(self) -> Iterator[None]:
        with self.turns.turn("ann"):
            self.slices += 1
            yield


def run(body: CalibrateRequest, predictor: NumericPredictor, owner: Owner, **kw: object) -> object:
    config = kw.pop("config", ServeConfig())
    gone = kw.pop("gone", never_gone)
    return asyncio.run(calibrate_in_slices(
        body, predictor, SPEC, config=config, turn=owner.turn, gone=gone,  # type: ignore[arg-type]
    ))  # fmt: skip


def test_the_largest_allowed_request_is_refused_before_any_work(
    predictor: NumericPredictor,
) -> None:
    owner = Owner(FairTurns())
    with pytest.raises(InvalidRequest) as refused:
        run(request(5000, 256, 512), predictor, owner)
    assert refused.value.detail[0]["field"] == "budget"
    assert "NUMTUNE_SERVE_MAX_REQUEST_TOKENS" in refused.value.detail[0]["message"]
    # Each question fits one request, but not all of them the calibration budget.
    with pytest.raises(InvalidRequest, match="NUMTUNE_SERVE_MAX_CALIBRATE_TOKENS"):
        run(request(2000, 64, 32), predictor, owner)
    assert owner.slices == 0


# A request budget small enough for a slice of one or two questions: the issue's
# 40 × 64 × 32 calibration, scaled down to run in seconds on a loaded 2-core machine.
SMALL = ServeConfig(max_request_tokens=800)


def test_another_owner_is_served_between_slices(predictor: NumericPredictor) -> None:
    """bob asks once ann's calibration began: he waits for one slice, not the whole run."""
    turns = FairTurns()
    ann = Owner(turns)
    waited: list[float] = []

    def bob() -> None:
        while ann.slices == 0:
            time.sleep(0.005)
        asked = time.monotonic()
        with turns.turn("bob"):
            waited.append(time.monotonic() - asked)
            predictor.predict(["What is 2 + 2?"], samples=0, max_new_tokens=4)

    other = threading.Thread(target=bob)
    other.start()
    began = time.monotonic()
    record = run(request(8, 16, 8), predictor, ann, config=SMALL)
    took = time.monotonic() - began
    other.join()
    assert record.n >= 1  # type: ignore[attr-defined]
    assert ann.slices >= 4  # 19 rows × (prompt + 8) positions: two questions at most a slice
    # bob waited for one slice at most, not for the whole calibration.
    assert waited and waited[0] < took / 2, (waited, took)


def test_it_stops_when_the_client_goes_and_at_its_time_limit(
    predictor: NumericPredictor,
) -> None:
    ann = Owner(FairTurns())
    asked = 0

    async def gone_after_one_slice() -> bool:
        nonlocal asked
        asked += 1
        return asked > 1

    with pytest.raises(ClientGone):
        run(request(8, 16, 8), predictor, ann, config=SMALL, gone=gone_after_one_slice)
    assert ann.slices == 4  # one slice: its three decoding passes and its samples, a turn each
    with pytest.raises(RequestTimedOut, match=r"NUMTUNE_SERVE_CALIBRATE_TIMEOUT_S|limit"):
        run(request(8, 16, 8), predictor, Owner(FairTurns()),
            config=ServeConfig(max_request_tokens=800, calibrate_timeout_s=0.05))  # fmt: skip
