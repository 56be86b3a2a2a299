"""`make demo`: fine-tune SmolLM2-135M on arithmetic with Smooth-MMD, then ask it numbers.

1. the untrained model's score on the held-out split (the baseline)
2. the fine-tune itself, as a Ray Train job on a local Ray (live progress bar)
3. the best checkpoint's score on the same split, and its answers to a few questions
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from jobs.data import Example, load_task
from jobs.evaluate import generate_answers, parse_number, score
from jobs.model import load_checkpoint_model, load_model_and_tokenizer
from jobs.spec import JobSpec, load_spec_file

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "smollm2-arith-smmd.yaml"
QUESTIONS = ["What is 317 + 24?", "Calculate -58 + 1203.", "What is 4.5 - 12?"]


def evaluate_model(
    model: object, tokenizer: object, spec: JobSpec, examples: list[Example]
) -> dict[str, float]:
    preds = generate_answers(
        model,
        tokenizer,
        examples,
        max_new_tokens=spec.train.eval_max_new_tokens,
        batch_size=16,
        use_chat_template=spec.model.use_chat_template,
    )
    return score(preds, [e.answer for e in examples], spec.data.task)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", type=Path, default=EXAMPLE)
    parser.add_argument("--steps", type=int, help="override train.steps (a quicker demo)")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")
    console = Console()
    data = load_spec_file(args.spec)
    if args.steps:
        train = data.get("train") or {}
        assert isinstance(train, dict)
        data["train"] = {**train, "steps": args.steps}
    spec = JobSpec.model_validate(data)

    console.rule("1. baseline: the model before fine-tuning")
    task = load_task(spec.data)
    model, tokenizer = load_model_and_tokenizer(spec.model)
    before = evaluate_model(model, tokenizer, spec, task.eval)
    console.print(json.dumps(before))

    console.rule(f"2. fine-tune on Ray Train: {spec.loss.name}, {spec.train.steps} steps")
    from jobs.__main__ import default_job_id, run_with_progress

    job_id = default_job_id(spec)
    result = run_with_progress(spec, job_id, None)
    if result["status"] != "succeeded":
        console.print(f"[red]job {job_id} failed: {result['reason']}: {result['detail']}")
        return 1

    console.rule("3. the fine-tuned model")
    tuned = load_checkpoint_model(result["best_checkpoint"])
    after = evaluate_model(tuned, tokenizer, spec, task.eval)
    table = Table("metric", "before", "after")
    for key in before:
        table.add_row(key, f"{before[key]:.4g}", f"{after[key]:.4g}")
    console.print(table)
    answers = generate_answers(
        tuned,
        tokenizer,
        [Example(q, "") for q in QUESTIONS],
        max_new_tokens=spec.train.eval_max_new_tokens,
        batch_size=4,
        use_chat_template=spec.model.use_chat_template,
    )
    for question, text in zip(QUESTIONS, answers, strict=True):
        console.print(f"{question}  →  {text!r}  (parsed: {parse_number(text)})")
    console.print(f"checkpoint: {result['best_checkpoint']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
