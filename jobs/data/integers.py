"""Integer tasks with bounded answers, generated and seeded: a small model can learn them.

    add      "What is 31 + 57?"              → 88     operands < 100 (answers < 200)
    mul      "What is 347 * 8?"              → 2776   2-3 digits times one (answers < 9000)
    listsum  "What is the sum of 12 5 13?"   → 30     3-4 numbers < 20 (answers < 80)
    units    "How many minutes in 3 h 25 min?" → 205  h/min, m/cm, min/s (answers < 5000)

`extrapolate` asks the same questions with larger numbers than training ever shows
(3-digit operands, 4-digit factors, 5-7 terms, hundreds of hours), so a model that learned
the algorithm and one that memorised the range part ways there. The held-out set never
repeats a training prompt.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from jobs.data.types import DataError, Example

INTEGER_TASKS = ("add", "mul", "listsum", "units")
Question = Callable[[random.Random, bool], tuple[str, int]]


def _add(rng: random.Random, big: bool) -> tuple[str, int]:
    lo, hi = (100, 1000) if big else (0, 100)
    a, b = rng.randrange(lo, hi), rng.randrange(lo, hi)
    return f"What is {a} + {b}?", a + b


def _mul(rng: random.Random, big: bool) -> tuple[str, int]:
    a = rng.randrange(1000, 10_000) if big else rng.randrange(10, 1000)
    b = rng.randrange(2, 10)
    return f"What is {a} * {b}?", a * b


def _listsum(rng: random.Random, big: bool) -> tuple[str, int]:
    terms = [rng.randrange(20) for _ in range(rng.randint(5, 7) if big else rng.randint(3, 4))]
    return f"What is the sum of {' '.join(map(str, terms))}?", sum(terms)


UNITS = (("h", "min", "minutes", 60), ("m", "cm", "centimetres", 100), ("min", "s", "seconds", 60))


def _units(rng: random.Random, big: bool) -> tuple[str, int]:
    big_unit, small_unit, plural, factor = rng.choice(UNITS)
    whole = rng.randrange(50, 500) if big else rng.randrange(50)
    part = rng.randrange(factor)
    return f"How many {plural} in {whole} {big_unit} {part} {small_unit}?", whole * factor + part


QUESTIONS: dict[str, Question] = {"add": _add, "mul": _mul, "listsum": _listsum, "units": _units}


def _draw(task: str, split: str, size: int, seed: int, avoid: set[str]) -> list[Example]:
    rng = random.Random(f"{task}/{split}/{seed}")
    make = QUESTIONS[task]
    out: list[Example] = []
    seen = set(avoid)
    # A bounded task has finitely many questions: give up rather than loop forever.
    for _ in range(size * 50):
        if len(out) == size:
            return out
        prompt, answer = make(rng, split == "extrapolate")
        if prompt not in seen:
            seen.add(prompt)
            out.append(Example(prompt, str(answer)))
    if len(out) < size:
        raise DataError(
            f"data.train_size/eval_size: task {task} has fewer than {size} distinct {split}"
            " questions left; ask for fewer"
        )
    return out


def integer_examples(
    task: str, split: str, train_size: int, eval_size: int, seed: int
) -> tuple[list[Example], list[Example]]:
    """(training examples, held-out examples of `split`), disjoint by prompt."""
    if task not in QUESTIONS:
        raise ValueError(f"unknown integer task {task!r}; known: {', '.join(INTEGER_TASKS)}")
    train = _draw(task, "train", train_size, seed, set())
    held = _draw(task, split, eval_size, seed, {ex.prompt for ex in train})
    return train, held
