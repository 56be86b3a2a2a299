"""The demo's tables: untrained vs trained on the same held-out questions, and the served
answers of each trained version next to the truth."""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table

from jobs.data import Example, load_task
from jobs.infer.evaluate import answers_for_spec, score
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import JobSpec
from service.cli.models import ask

# (metric, header, format): the held-out scores a job reports as `eval_<metric>`.
METRICS = (
    ("exact_match", "exact match", "{:.1%}"),
    ("within_5pct", "within 5 %", "{:.1%}"),
    ("mae", "MAE", "{:.3g}"),
    ("median_rel_error", "median rel. error", "{:.3g}"),
    ("parse_failure_rate", "unparseable", "{:.1%}"),
)
INTERVAL = 0.9
# (command, what it shows); {name} is the production model, {api} the control plane.
NEXT_STEPS = (
    ("{api}/ui", "the dashboard: curves, compare, registry, ask (paste the admin token)"),
    ("numtune list", "every job, newest first"),
    ("numtune status JOB_ID", "a job's status and final metrics"),
    ("numtune logs JOB_ID", "its log"),
    ("numtune models show {name}", "versions, their metrics and aliases"),
    ('numtune predict "How many minutes in 2 h 5 min?" --model {name}@production', ""),
    ("numtune submit examples/smollm2-arith-smmd.yaml --follow", "fine-tune SmolLM2-135M"),
    ("make bench-accuracy", "the study behind the README's verdicts"),
    ("curl -H 'Authorization: Bearer ...' {api}/openapi.json", "the REST API's schema"),
)


def next_steps(name: str, api: str) -> str:
    """The commands to look further, comments aligned after the names are filled in."""
    rows = [(cmd.format(name=name, api=api), why) for cmd, why in NEXT_STEPS]
    width = max(len(cmd) for cmd, why in rows if why)
    return "\n".join(f"{cmd:<{width}}  # {why}" if why else cmd for cmd, why in rows)


def untrained_metrics(spec: JobSpec) -> tuple[dict[str, float], list[Example]]:
    """The job's model before any step, scored on the job's own held-out questions."""
    examples = load_task(spec.data).eval
    model, tokenizer = load_model_and_tokenizer(spec.model, seed=spec.train.seed)
    preds = answers_for_spec(model.eval(), tokenizer, examples, spec)
    return score(preds, [ex.answer for ex in examples], spec.data.task), examples


def _cell(value: float | None, fmt: str) -> str:
    """No value, or NaN (the MAE of a model whose answers all fail to parse): "-"."""
    return "-" if value is None or math.isnan(value) else fmt.format(value)


def metrics_table(before: dict[str, float], jobs: list[dict[str, Any]], labels: list[str]) -> Table:
    """One row per model: untrained, then each job's final held-out evaluation."""
    table = Table("model", *(header for _, header, _ in METRICS), title="held-out questions")
    rows = [("untrained", before)]
    for job, label in zip(jobs, labels, strict=True):
        final = job.get("final_metrics") or {}
        rows.append((label, {k[5:]: v for k, v in final.items() if k.startswith("eval_")}))
    for label, metrics in rows:
        table.add_row(label, *(_cell(metrics.get(key), fmt) for key, _, fmt in METRICS))
    return table


def served_cell(prediction: dict[str, Any]) -> str:
    """`205  (E 204.6 ± 3.1, 90 % in [200, 210])` from one /v1/predict prediction."""
    text = prediction["text"].strip() or "(empty)"
    mean, std, bounds = (prediction.get(k) for k in ("expected_value", "std", "interval"))
    if mean is None or std is None:
        return text
    spread = f"E {mean:.4g} ± {std:.2g}"
    if bounds:
        spread += f", {INTERVAL:.0%} in [{bounds[0]:.4g}, {bounds[1]:.4g}]"
    return f"{text}  ({spread})"


def answers_table(refs: list[str], examples: list[Example], samples: int) -> Table:
    """Each served version's greedy answer and its K-sample spread, beside the truth."""
    prompts = [ex.prompt for ex in examples]
    replies = [ask(ref, prompts, samples=samples, interval=INTERVAL) for ref in refs]
    table = Table("question", "true", *refs, title=f"served answers (K = {samples} samples)")
    for i, ex in enumerate(examples):
        table.add_row(ex.prompt, ex.answer, *(served_cell(r["predictions"][i]) for r in replies))
    return table
