"""The numeric decodings a job's final evaluation can score, and how a study names the one
each arm is judged by.

Greedy-type decodings (one generation each, all of them in one batched pass:
jobs/infer/all_decodings.py):
    greedy        the most probable token at every step
    number_first  greedy, but the number tokens compete as one choice (jobs/infer/number_first.py)
    expected      the job's greedy decoding (`train.eval_decoding`) with every number token
                  replaced by the one nearest the mean of the model's distribution over number
                  tokens (jobs/infer/decoding.py)
    median        the same with the distribution's median
Sampled decodings (K = `train.eval_samples` completions per question, one sampling pass for
both):
    sample_mean   the mean of the numbers parsed from the K samples
    sample_median their median (the best point estimate under absolute error)

New fields are left out of a spec's JSON while they hold their default, so the ids and
digests of specs written before them do not move.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator

ScoredDecoding = Literal[
    "greedy", "number_first", "expected", "median", "sample_mean", "sample_median"
]  # fmt: skip
SCORED_DECODINGS: tuple[str, ...] = get_args(ScoredDecoding)
GREEDY_DECODINGS = ("greedy", "number_first", "expected", "median")
SAMPLED_DECODINGS = ("sample_mean", "sample_median")
# The extra decodings a run scores by default: those one batched greedy pass gives beside the
# job's own (measured: docs/guide/decodings.md); K samples only when asked.
DEFAULT_EVAL_DECODINGS: tuple[ScoredDecoding, ...] = ("number_first", "expected", "median")
DEFAULT_EVAL_SAMPLES = 16


def _distinct(v: tuple[str, ...]) -> tuple[str, ...]:
    if len(set(v)) != len(v):
        raise ValueError("name each decoding once")
    return v


DecodingSet = Annotated[tuple[ScoredDecoding, ...], AfterValidator(_distinct)]

# What a study judges an arm by: one decoding, or the one best on validation rows carved
# from the training rows (each run holds them out, jobs/data: `data.validation_size`).
BEST_ON_VALIDATION = "best_on_validation"
StudyDecoding = Literal[ScoredDecoding, "best_on_validation"]


def is_default(default: Any) -> Any:
    """An `exclude_if` for a field: leave it out of dumps while it equals `default`."""
    return lambda value: value == default
