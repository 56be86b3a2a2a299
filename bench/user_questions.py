"""The user-style JSONL task of both protocols: word problems the way a user's own data might
look, a sentence and a number (bench/protocol.md: 5,000 rows, seed 0)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

ITEMS = [("apples", "bag"), ("pencils", "box"), ("eggs", "carton"), ("stamps", "album")]


def user_question(rng: random.Random) -> dict[str, Any]:
    """One question the way a user's own data might look: a sentence and a number."""
    thing, holder = rng.choice(ITEMS)
    kind = rng.randrange(3)
    if kind == 0:
        a, b = rng.randrange(10, 500), rng.randrange(10, 500)
        return {"prompt": f"Ana has {a} {thing} and gets {b} more. How many now?", "answer": a + b}
    if kind == 1:
        a = rng.randrange(100, 999)
        b = rng.randrange(1, a)
        return {
            "prompt": f"Ben had {a} {thing} and gave away {b}. How many are left?",
            "answer": a - b,
        }
    a, b = rng.randrange(2, 13), rng.randrange(2, 40)
    return {
        "prompt": f"Each {holder} holds {b} {thing}. How many in {a} {holder}s?",
        "answer": a * b,
    }


def write_user_jsonl(path: Path, rows: int, seed: int = 0) -> Path:
    """Write `rows` generated questions as JSONL, one {"prompt", "answer"} object a line."""
    rng = random.Random(f"user-jsonl/{seed}")
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(user_question(rng)) for _ in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
