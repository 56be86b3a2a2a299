"""Step 6 of the training loop (jobs/train/loop.py), on every rank: the held-out evaluation
(greedy answers on each rank's share, gathered and scored on all of it; teacher-forced losses
on the plain module) and the report to Ray Train, with a checkpoint when one is due."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import ray.train
import torch
import torch.distributed as dist
from transformers import PreTrainedModel

from jobs.data import Example
from jobs.data.tokenize import MODEL_INPUTS, Row, collate
from jobs.infer.evaluate import answers_for_spec, question_records, score_records
from jobs.losses import BatchCounts, NumericVocab, shift_labels
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec
from jobs.stats import QuestionRecord
from jobs.train.checkpoint import save_checkpoint
from jobs.train.decodings import final_decodings
from jobs.train.engine import Engine
from jobs.train.pause import save_rng_state
from jobs.train.worker import Job


def evaluate(job: Job, full: PreTrainedModel, answers_to: RunFiles | None) -> dict[str, float]:
    """The held-out scores (`eval_` metrics) and losses of the whole model; the judged
    answers written to `answers_to` (the run's final evaluation, rank 0)."""
    spec, worker, tokenizer = job.spec, job.worker, job.tokenizer
    scores, answers = evaluate_sharded(
        full, tokenizer, job.eval_examples, spec, worker.rank, worker.world
    )
    if answers_to is not None:
        answers_to.write_predictions(answers)  # the run's final answers
        # ... and under every other decoding the job asks for (jobs/train/decodings.py).
        final_decodings(full, tokenizer, job.eval_examples, spec, (answers, scores), answers_to)
    pad_id = tokenizer.pad_token_id
    return scores | eval_losses(full, job.loss_fn, job.eval_rows, job.vocab, spec, pad_id)


def report(
    job: Job,
    engine: Engine,
    full: PreTrainedModel,
    metrics: dict[str, Any],
    checkpoint: bool,
    files: RunFiles | None,
    run_name: str | None,
) -> str | None:
    """`metrics` to Ray Train (a barrier: every rank reports), with a checkpoint when one is
    due; that checkpoint's URI where rank 0 keeps the run's `files`."""
    if not checkpoint:
        ray.train.report(metrics)
        return None
    name = report_with_checkpoint(engine, full, job.tokenizer, job.spec, metrics, job.worker.rank)
    if files is None:
        return None
    # Ray Train keeps a reported checkpoint at <storage>/<run name>/<dir name>.
    return files.to_uri(f"{files.root}/{run_name}/{name}")


def evaluate_sharded(
    model: torch.nn.Module,
    tokenizer: Any,
    examples: list[Example],
    spec: JobSpec,
    rank: int,
    world: int,
) -> tuple[dict[str, float], list[QuestionRecord]]:
    """Greedy generation on this rank's share of the held-out set, scored on all of it:
    the metrics and every answer judged, in the held-out set's order on every rank."""
    mine = range(rank, len(examples), world)
    preds = answers_for_spec(model, tokenizer, [examples[i] for i in mine], spec)
    answered = list(zip(mine, preds, strict=True))
    if world > 1:
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, answered)
        answered = sorted(pair for part in gathered for pair in part)
    records = question_records(
        [pred for _, pred in answered],
        [examples[i].answer for i, _ in answered],
        spec.data.task,
        prompts=[examples[i].prompt for i, _ in answered],
    )
    return {f"eval_{k}": v for k, v in score_records(records).items()}, records


@torch.no_grad()
def eval_losses(
    model: torch.nn.Module,
    loss_fn: torch.nn.Module,
    rows: list[Row],
    vocab: NumericVocab,
    spec: JobSpec,
    pad_id: int,
) -> dict[str, float]:
    """Teacher-forced loss and CE on the held-out rows: exact means over all of them.

    Every rank runs the same batches on the plain module: no collective to mismatch
    (DDP's buffer broadcast, ZeRO-3's gathers), and the set is small."""
    size = max(8, spec.train.batch_size)
    device = next(model.parameters()).device
    chunks = [collate(rows[i : i + size], pad_id) for i in range(0, len(rows), size)]
    labels = [shift_labels(c["labels"]).to(device) for c in chunks]
    counts = BatchCounts.of(labels, vocab)  # denominators of the whole set, on every rank
    sums = torch.zeros(2, device=device)
    for chunk, target in zip(chunks, labels, strict=True):
        logits = model(**{k: v.to(device) for k, v in chunk.items() if k in MODEL_INPUTS}).logits
        out = loss_fn(logits, target, num_items_in_batch=counts)
        sums += torch.stack([out.total, out.ce])
    return {"eval_loss": float(sums[0]), "eval_ce": float(sums[1])}


def report_with_checkpoint(
    engine: Engine,
    full: PreTrainedModel,
    tokenizer: Any,
    spec: JobSpec,
    metrics: dict[str, Any],
    rank: int,
) -> str:
    """Rank 0 writes the whole model, every rank the engine's state it holds (DeepSpeed: its
    ZeRO shard); Ray Train merges the ranks' folders into one checkpoint. Returns the
    checkpoint's folder name, named by its step so that rank 0 knows it without asking."""
    name = f"checkpoint_step_{metrics['step']:07d}"
    with tempfile.TemporaryDirectory() as tmp:
        if rank == 0:
            save_checkpoint(Path(tmp), model=full, tokenizer=tokenizer, spec=spec, metrics=metrics)
        engine.save_state(Path(tmp), rank)
        save_rng_state(Path(tmp), rank)  # after the evaluation's draws: where the run goes on
        wrote = any(Path(tmp).iterdir())
        checkpoint = ray.train.Checkpoint.from_directory(tmp) if wrote else None
        ray.train.report(metrics, checkpoint=checkpoint, checkpoint_dir_name=name)
    return name
