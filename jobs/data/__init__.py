"""Tasks: DeepMind arithmetic, integer tasks with bounded answers, clock times, GSM-style
problems, questions about generated pictures, the user's JSONL and tables (table → number)."""

from __future__ import annotations

import random

from jobs.data.arithmetic import arithmetic_examples
from jobs.data.clock import clock_examples
from jobs.data.gsm import gsm_examples
from jobs.data.images import image_examples
from jobs.data.integers import INTEGER_TASKS, integer_examples
from jobs.data.jsonl import read_jsonl
from jobs.data.table import table_task
from jobs.data.types import DataError, Example, TaskData
from jobs.spec import IMAGE_TASKS, DataSpec

__all__ = ["DataError", "Example", "TaskData", "load_task"]


def _round_robin(parts: list[list[Example]], size: int) -> list[Example]:
    """Interleave modules so any prefix holds all of them."""
    out = [ex for group in zip(*parts, strict=True) for ex in group]
    return out[:size]


def _split(rows: list[Example], eval_size: int, seed: int, what: str) -> tuple[list, list]:
    if len(rows) <= eval_size:
        raise DataError(f"data.eval_size: {what} has {len(rows)} rows; hold out fewer than that")
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    held = set(order[:eval_size])
    return [r for i, r in enumerate(rows) if i not in held], [rows[i] for i in order[:eval_size]]


def load_task(spec: DataSpec) -> TaskData:
    """Training and held-out examples for a DataSpec, deterministic in `spec.seed`."""
    if spec.eval_split == "validation":
        return _validation(spec)
    if spec.validation_size:
        # The rows eval_split: validation would hold out, now beside the held-out questions.
        carved = _validation(spec.model_copy(update={"eval_size": spec.validation_size}))
        return TaskData(spec.task, carved.train, _load(spec).eval, carved.eval)
    return _load(spec)


def _validation(spec: DataSpec) -> TaskData:
    """The rows a job of this data would train on, the last `eval_size` of them held out as
    the validation split (a sweep's: it tunes on training rows only). The held-out
    questions themselves are never read: a JSONL test file is not opened, and a generated
    task draws the training rows the evaluation runs draw, whatever their split."""
    if spec.task == "jsonl" and spec.eval_path:
        assert spec.path is not None  # DataSpec guarantees a path for jsonl
        images = dict(spec.images or {}).get
        rows = read_jsonl(spec.path, files=images)[: spec.train_size]
    else:
        rows = _load(spec.model_copy(update={"eval_split": "interpolate"})).train
    if len(rows) <= spec.eval_size:
        raise DataError(
            f"data.eval_size: the validation split is carved from {len(rows)} training rows;"
            f" hold out fewer than {spec.eval_size}"
        )
    return TaskData(spec.task, rows[: -spec.eval_size], rows[-spec.eval_size :])


def _load(spec: DataSpec) -> TaskData:
    if spec.task == "arithmetic":
        per = -(-max(spec.train_size, spec.eval_size) // len(spec.modules))
        train = _round_robin(
            [arithmetic_examples(m, "train", per, spec.seed) for m in spec.modules],
            spec.train_size,
        )
        held = _round_robin(
            [arithmetic_examples(m, spec.eval_split, per, spec.seed) for m in spec.modules],
            spec.eval_size * 2,
        )
        # The generator can repeat a question across splits: keep evaluation unseen.
        seen = {ex.prompt for ex in train}
        return TaskData(
            "arithmetic", train, [ex for ex in held if ex.prompt not in seen][: spec.eval_size]
        )
    if spec.task in INTEGER_TASKS:
        train, held = integer_examples(
            spec.task, spec.eval_split, spec.train_size, spec.eval_size, spec.seed
        )
        return TaskData(spec.task, train, held)
    if spec.task == "clock":
        train = clock_examples("train", spec.train_size, spec.seed)
        return TaskData("clock", train, clock_examples(spec.eval_split, spec.eval_size, spec.seed))
    if spec.task in IMAGE_TASKS:
        train = image_examples(spec.task, "train", spec.train_size, spec.seed)
        held = image_examples(spec.task, spec.eval_split, spec.eval_size, spec.seed)
        return TaskData(spec.task, train, held)
    if spec.task == "table":
        return table_task(spec)
    if spec.task == "gsm":
        train, held = _split(gsm_examples(), spec.eval_size, spec.seed, "the gsm task")
        return TaskData("gsm", train[: spec.train_size], held)
    assert spec.path is not None  # DataSpec guarantees a path for jsonl
    images = dict(spec.images or {}).get  # uploaded images, pinned by the control plane
    rows = read_jsonl(spec.path, files=images)
    if spec.eval_path:
        held = read_jsonl(spec.eval_path, files=images)
        return TaskData("jsonl", rows[: spec.train_size], held[: spec.eval_size])
    train, held = _split(rows, spec.eval_size, spec.seed, spec.path)
    return TaskData("jsonl", train[: spec.train_size], held)
