"""The failure code of a run that raised: chosen by the class of what was raised, never by
its name or message.

Ray Train hands the driver its own exceptions around ours: `WorkerGroupError` holds each
failed worker's exception (the original class, unpickled: `worker_failures`, by rank),
`ControllerError` the controller's (`controller_failure`, e.g. a worker group that never
started), `RayTaskError` a task's (`cause`); in local mode (no workers) ours come bare.
`failure_code` looks through all of them.
"""

from __future__ import annotations

from collections.abc import Iterator

import ray.exceptions
import torch
from pydantic import ValidationError
from ray.train import ControllerError, WorkerGroupError
from ray.train.v2._internal.exceptions import WorkerGroupStartupTimeoutError

from jobs.data.types import DataError
from jobs.modeling.folders import ModelUnavailableError
from jobs.records.models import FailureCode
from jobs.train.divergence import DivergedError
from jobs.train.worker import PrecisionUnsupportedError

# First match wins, in this order (a worker that ran out of memory explains the others'
# failures). ModelUnavailableError covers an adapter's base gone or changed
# (jobs/modeling/adapters.py: BaseMissingError, BaseChangedError). Ray exports no public
# name for its worker-group start-up timeout: the class is its internal module's.
KNOWN: tuple[tuple[tuple[type[BaseException], ...], FailureCode], ...] = (
    ((torch.OutOfMemoryError, ray.exceptions.OutOfMemoryError, MemoryError), FailureCode.OOM),
    ((PrecisionUnsupportedError, ValidationError), FailureCode.INVALID_SPEC),
    ((DataError,), FailureCode.INVALID_DATA),
    ((ModelUnavailableError,), FailureCode.MODEL_UNAVAILABLE),
    ((DivergedError,), FailureCode.DIVERGED),
    ((WorkerGroupStartupTimeoutError,), FailureCode.INSUFFICIENT_RESOURCES),
)


def failure_code(error: BaseException) -> FailureCode:
    """The code for a run that raised `error`; `worker_failed` for anything unknown."""
    found = list(causes(error))
    for kinds, code in KNOWN:
        if any(isinstance(cause, kinds) for cause in found):
            return code
    return FailureCode.WORKER_FAILED


def described(error: BaseException) -> str:
    """The detail shown with a failure: display only, the code says what it was."""
    return f"{type(error).__name__}: {error}"[:4000]


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and everything it wraps, each once: Ray's wrappers' contents (workers by
    rank) and every exception's `__cause__`."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, WorkerGroupError):
            by_rank = current.worker_failures
            pending.extend(by_rank[rank] for rank in sorted(by_rank))
        if isinstance(current, ControllerError):
            pending.append(current.controller_failure)
        if isinstance(current, ray.exceptions.RayTaskError) and current.cause is not None:
            pending.append(current.cause)
        if current.__cause__ is not None:
            pending.append(current.__cause__)
