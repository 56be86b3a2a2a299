"""DeepMind `mathematics_dataset` arithmetic (the NTIL paper's task), seeded and cached.

Splits: `train` (the library's training entropy), `interpolate` (its test set: same
difficulty) and `extrapolate` (its extrapolation set: larger numbers, longer expressions).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from pathlib import Path

import numpy as np

from jobs.data import _mds_compat
from jobs.data.types import Example
from jobs.storage.paths import build_once, cache_dir

log = logging.getLogger(__name__)

GENERATOR_VERSION = 1  # bump when generation changes, so stale caches are not reused
# Our module name → the library's extrapolation module of the same kind.
EXTRAPOLATE = {
    "add_or_sub": "add_or_sub_big",
    "mul": "mul_big",
    "div": "div_big",
    "add_sub_multiple": "add_sub_multiple_longer",
    "mul_div_multiple": "mul_div_multiple_longer",
    "mixed": "mixed_longer",
}
MAX_QUESTION, MAX_ANSWER = 160, 30  # the library's own limits (generate_settings)
ROWS = "examples.jsonl"  # one cached split: a folder holding this file


def _generate(module: str, split: str, size: int, seed: int) -> list[Example]:
    arithmetic = _mds_compat.arithmetic()
    if split == "train":
        make = arithmetic.train(lambda entropy: entropy)[module]
    elif split == "interpolate":
        make = arithmetic.test()[module]
    else:
        make = arithmetic.test_extra()[EXTRAPOLATE[module]]
    # The library draws from Python's `random` and numpy's global state: seed both.
    random.seed(f"{module}/{split}/{seed}")
    np.random.seed(int(hashlib.sha256(f"{module}/{split}/{seed}".encode()).hexdigest()[:8], 16))
    out: list[Example] = []
    while len(out) < size:
        problem = make()
        question, answer = str(problem.question), str(problem.answer)
        if len(question) <= MAX_QUESTION and len(answer) <= MAX_ANSWER:
            out.append(Example(question, answer))
    return out


def arithmetic_examples(module: str, split: str, size: int, seed: int) -> list[Example]:
    """`size` examples of one module and split, from the cache when it has them."""
    key = json.dumps([GENERATOR_VERSION, module, split, size, seed])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    folder = cache_dir("data", "arithmetic") / f"{module}-{split}-{digest}"

    def generate(tmp: Path) -> None:
        examples = _generate(module, split, size, seed)
        (tmp / ROWS).write_text("".join(json.dumps(ex.as_row()) + "\n" for ex in examples))
        log.info("generated %d %s/%s examples into %s", size, module, split, folder)

    # Every rank seeds the global RNG identically before this, so nothing here may draw
    # from it: build_once generates under a file lock into a private folder it renames.
    build_once(folder, generate, marker=ROWS)
    rows = [json.loads(line) for line in (folder / ROWS).read_text().splitlines()]
    return [Example(r["prompt"], r["answer"]) for r in rows]
