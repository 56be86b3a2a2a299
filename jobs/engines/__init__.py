"""Generation engines other than transformers' `generate`, behind NumericPredictor.

`vllm_engine.py` (numtune's environment) starts and talks to `vllm_worker.py`, which runs
vLLM in an environment of its own (`.venv-vllm`: vLLM pins transformers and FastAPI below
numtune's versions). They exchange token ids as JSON lines over the worker's stdin and
stdout: numtune tokenizes, formats and reads the numbers out; vLLM only decodes.
`number_rule.py` is number-first's rule on a logits tensor, shared by both sides (torch
only, so the worker can import it without numtune's dependencies).
"""
