"""Numeric-query inference, shared by the Ray Serve deployment and by evaluation:
`predictor.py` (NumericPredictor: predict, sampled_numbers, complete, stream),
`generation.py` (generate(), the prompt prefill K samples share, streaming), `results.py`
(Prediction, Completion, InferenceRequestError).

    predictor = NumericPredictor.from_checkpoint("<run>/train/checkpoint_…")
    [p] = predictor.predict(["What is 317 + 24?"], decoding="median", samples=16)
    p.value, p.expected_value, p.interval

One call handles a whole batch: the left-padded prompts are run once (`prefill`,
generation.py), and from that KV cache one decoding pass gives each prompt's greedy text
and its K samples together (`greedy_and_sampled`: the cache repeated for K sampled rows
and one greedy row per prompt). `text` is the greedy completion,
or with `decoding="expected"|"median"` the greedy one with each number token replaced as
jobs/infer/decoding.py describes: those decodings read the model's distribution over number
tokens at each step and draw no samples. The K samples, drawn from the model's own
distribution (temperature 1 by default, no top-k or top-p cut), give only `expected_value`,
`median`, `std` and `interval`; samples=0 skips them. Prompts are formatted exactly as in
training (jobs/data/tokenize.py); numbers are parsed as evaluation parses them.
"""

from jobs.infer.predictor import NumericPredictor
from jobs.infer.results import TASKS, Completion, Decoding, InferenceRequestError, Prediction

__all__ = [
    "TASKS",
    "Completion",
    "Decoding",
    "InferenceRequestError",
    "NumericPredictor",
    "Prediction",
]
