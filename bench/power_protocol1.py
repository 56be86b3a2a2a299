"""Power of the first protocol's cells (bench/protocol.md), from their per-question answers.

    .venv/bin/python -m bench.power_protocol1            # prints a table and writes nothing
    .venv/bin/python -m bench.power_protocol1 --json bench/results/power-protocol1.json

Per cell (task) and arm: the split of the paired differences with ce into a seed part and
a question part (jobs.stats.power.estimate_spread), the smallest exact-match difference
the cell could detect at 80 % power with its 5 seeds × 150 questions — at plain alpha 0.05
and at Holm's strictest step over the protocol's family of 6 primary tests (alpha/6) — and,
for a second protocol, the seeds needed for ±0.02 at 1,000 questions and the questions
needed at 10 seeds, planned on the cell's widest split; and per arm the seed part's 80 %
upper bound from its 5 seeds (χ²) with the seeds ±0.02 would need if it were that large.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent

from bench.accuracy_stats import outcomes  # noqa: E402
from bench.readme_pretrained import load_runs  # noqa: E402
from jobs.stats.power import (  # noqa: E402
    Spread,
    detectable_effect,
    questions_needed,
    seeds_needed,
)
from jobs.stats.power_study import arm_spreads, widest  # noqa: E402

RECORDS = BENCH / "results" / "pretrained-runs"
FAMILY = 6  # {emd, smmd_tuned, del} × {units, jsonl}: the protocol's Holm family
TARGET = 0.02
PLANNED_QUESTIONS = 1000
PLANNED_SEEDS = 10


def figures(records: Path = RECORDS, metric: str = "exact_match") -> list[dict[str, Any]]:
    """One row per (task, arm), then one per task for the widest split ('all arms')."""
    runs, _ = load_runs(records)
    rows = []
    for (_, task, split), arms in sorted(outcomes(runs).items()):
        spreads = arm_spreads(arms, "ce", metric)
        for s in spreads:
            own = Spread(s.seed_sd, s.question_sd)
            kept = s.model_dump(include={"arm", "observed_sd", "floor_sd", "seed_sd_upper"})
            rows.append({"task": task, "split": split, **kept, **_plan(own, s.seeds, s.questions)})
            upper = Spread(s.seed_sd_upper, s.question_sd)
            rows[-1]["seeds_for_002_at_1000q_upper"] = seeds_needed(
                TARGET, upper, PLANNED_QUESTIONS
            )
        if spreads:
            rows.append(
                {"task": task, "split": split, "arm": "all arms (widest)", **_plan(widest(spreads))}
            )
    return rows


def _plan(spread: Spread, seeds: int = 5, questions: float = 150) -> dict[str, Any]:
    return {
        "seed_sd": spread.seed_sd,
        "question_sd": spread.question_sd,
        "seeds": seeds,
        "questions": questions,
        "mde_alpha": detectable_effect(spread, seeds, questions),
        "mde_holm6": detectable_effect(spread, seeds, questions, family=FAMILY),
        "seeds_for_002_at_1000q": seeds_needed(TARGET, spread, PLANNED_QUESTIONS),
        "seeds_for_002_at_1000q_holm2": seeds_needed(TARGET, spread, PLANNED_QUESTIONS, family=2),
        "questions_for_002_at_10_seeds": questions_needed(TARGET, spread, PLANNED_SEEDS),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=RECORDS)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = figures(args.records)
    head = ("task", "split", "arm", "seed_sd", "question_sd", "observed_sd", "mde_alpha",
            "mde_holm6", "seed_sd_upper", "seeds_for_002_at_1000q",
            "seeds_for_002_at_1000q_upper", "seeds_for_002_at_1000q_holm2",
            "questions_for_002_at_10_seeds")  # fmt: skip
    sys.stdout.write(" | ".join(head) + "\n")
    for row in rows:
        cells = [row.get(k) for k in head]
        text = [f"{c:.4f}" if isinstance(c, float) else str(c) for c in cells]
        sys.stdout.write(" | ".join(text) + "\n")
    if args.json is not None:
        kept = {
            "what": "protocol 1 (bench/protocol.md): the split of each arm's paired "
            "exact-match differences with ce, its detectable effect at 80 % power and what "
            f"±{TARGET} would need (jobs/stats/power.py)",
            "command": "python -m bench.power_protocol1 --json bench/results/power-protocol1.json",
            "family": FAMILY,
            "rows": rows,
        }
        args.json.write_text(json.dumps(kept, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
