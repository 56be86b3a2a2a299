"""The training loop each Ray Train worker runs, top to bottom.

    1. context: rank, device, seed, precision
    2. model + tokenizer (from the latest checkpoint when Ray restarted us) + numeric loss
    3. data: the task's examples, tokenised, this rank's shard
    4. optimizer and schedule; DDP (Ray Train) or a DeepSpeed ZeRO engine
    5. loop: accumulate micro-batches, step, log the loss parts (rank 0, no barrier)
    6. evaluate (every eval_every, at checkpoints, at the end) and checkpoint with metrics;
       a loss that became inf or NaN fails the run there instead (jobs/train/divergence.py)

Every worker calls `ray.train.report` the same number of times (it is a barrier): at
evaluations and checkpoints only. Log steps go from rank 0 to `metrics.jsonl` directly.
"""

from __future__ import annotations

import math
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ray.train
import ray.train.torch
import torch
import torch.distributed as dist
from transformers import PreTrainedModel

from jobs.data import Example, load_task
from jobs.data.tokenize import MODEL_INPUTS, Row, collate, encode_example
from jobs.infer.evaluate import answers_for_spec, question_records, score_records
from jobs.losses import BatchCounts, NumericVocab, build_loss, shift_labels
from jobs.losses.head import HeadLoss
from jobs.modeling.adapters import inner_model
from jobs.modeling.model import load_checkpoint_model, load_model_and_tokenizer, load_tokenizer_for
from jobs.modeling.vision import VisionInputs
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec
from jobs.stats import QuestionRecord
from jobs.tracking.job import worker_sink
from jobs.train.checkpoint import checkpoint_step, save_checkpoint
from jobs.train.divergence import Divergence
from jobs.train.engine import Engine, build_engine
from jobs.train.steplog import StepLog, plain

Batch = dict[str, torch.Tensor]


class PrecisionUnsupportedError(RuntimeError):
    """bf16 asked for on hardware that cannot run it natively."""


def check_precision(spec: JobSpec, device: torch.device) -> None:
    """Refuse bf16 where it would silently be emulated or ignored."""
    if spec.train.precision != "bf16":
        return
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise PrecisionUnsupportedError("train.precision: this GPU does not support bf16")
    if device.type == "cpu" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        # Without native bf16 (AVX512-BF16/AMX or AVX512 emulation) it would crawl.
        raise PrecisionUnsupportedError("train.precision: this CPU has no native bf16 support")


def total_steps(spec: JobSpec, n_train: int, world: int) -> int:
    """Optimizer steps to run: `steps`, or enough for `epochs` over the training set."""
    if spec.train.steps is not None:
        return spec.train.steps
    per_step = spec.train.batch_size * spec.train.grad_accum * world
    return max(1, math.ceil((spec.train.epochs or 0) * n_train / per_step))


def micro_batches(rows: list[Row], batch_size: int, pad_id: int, seed: int) -> Iterator[Batch]:
    """Endless shuffled micro-batches of this rank's rows (a new order every epoch)."""
    epoch = 0
    while True:
        order = list(range(len(rows)))
        random.Random(seed * 100_003 + epoch).shuffle(order)
        for i in range(0, len(order) - batch_size + 1, batch_size):
            yield collate([rows[j] for j in order[i : i + batch_size]], pad_id)
        epoch += 1


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


def train_loop_per_worker(config: dict[str, Any]) -> None:
    spec = JobSpec.model_validate(config["spec"])
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()

    # 1. context ---------------------------------------------------------------------
    device = ray.train.torch.get_device()
    check_precision(spec, device)
    if device.type == "cpu":
        # Use the cores this worker reserved, not every core (workers share a node);
        # rounded, not floored: a sweep trial's 1.98 CPUs (0.02 go to its driver) is 2 cores.
        torch.set_num_threads(max(1, round(spec.scaling.cpus_per_worker)))
    torch.manual_seed(spec.train.seed + rank)

    # 2. model, tokenizer, loss (resume from Ray's latest checkpoint if there is one) --
    resume = ray.train.get_checkpoint()
    start_step = 0
    if resume is None:
        model, tokenizer = load_model_and_tokenizer(spec.model, seed=spec.train.seed)
    else:
        tokenizer = load_tokenizer_for(spec.model)
        with resume.as_directory() as ckpt_dir:
            # An adapter job's checkpoint: the verified base + the adapter, trainable again.
            model = load_checkpoint_model(Path(ckpt_dir), trainable=True)
            start_step = checkpoint_step(Path(ckpt_dir))
    vocab = NumericVocab.from_tokenizer(tokenizer)
    loss_fn = build_loss(spec.loss, vocab).to(device)

    # 3. data: every rank tokenises the same list (deterministic) and keeps its shard ---
    task = load_task(spec.data)
    vision = VisionInputs.of(inner_model(model))  # None for a text model
    rows = [
        encode_example(tokenizer, ex, spec.data.max_length, spec.model.use_chat_template, vision)
        for ex in task.train[rank::world]
    ]
    if len(rows) < spec.train.batch_size:
        raise ValueError(
            f"train.batch_size: {spec.train.batch_size} is more than this worker's "
            f"{len(rows)} training examples (data.train_size / scaling.num_workers)"
        )
    eval_rows = [
        encode_example(tokenizer, ex, spec.data.max_length, spec.model.use_chat_template, vision)
        for ex in task.eval
    ]
    steps = total_steps(spec, len(task.train), world)
    batches = micro_batches(rows, spec.train.batch_size, tokenizer.pad_token_id, spec.train.seed)

    # 4. optimizer, schedule, distributed wrapper --------------------------------------
    engine: Engine = build_engine(model, spec, steps, device)
    if resume is not None:
        # Optimizer and schedule state from the same folder (DeepSpeed: each rank its shard).
        with resume.as_directory() as ckpt_dir:
            engine.load_state(Path(ckpt_dir))
        # Skip the batches already consumed so a resumed run sees the same data order.
        for _ in range(start_step * spec.train.grad_accum):
            next(batches)

    # The loss from hidden states in chunks when the head allows (no [tokens, V] logits);
    # ZeRO-3 partitions the head's weight outside its own forward, so it keeps the logits.
    fused = spec.train.fused_linear_loss and not (
        spec.scaling.deepspeed is not None and spec.scaling.deepspeed.stage == 3
    )
    # An adapter's wrapper hides the head: the model inside has it (LoRA leaves it plain).
    step_loss = HeadLoss(loss_fn, inner_model(engine.unwrapped), enabled=fused)

    # 5.-6. loop -----------------------------------------------------------------------
    # Rank 0 writes every metrics row; `run_uri` is None where Ray's reports are the record
    # (Tune trials).
    run_uri = config.get("run_uri")
    # With tracking on, the same writer thread sends each row to the job's MLflow run.
    tracked = worker_sink(config.get("tracking")) if rank == 0 and run_uri else None
    steplog = StepLog(
        RunFiles.at(run_uri) if rank == 0 and run_uri else None,
        tracked.log_rows if tracked else None,
    )
    divergence = Divergence(device)
    t_last = time.perf_counter()
    for step in range(start_step + 1, steps + 1):
        micro = [
            {k: v.to(device) for k, v in next(batches).items()}
            for _ in range(spec.train.grad_accum)
        ]
        targets = [shift_labels(b["labels"]) for b in micro]
        counts = BatchCounts.of(targets, vocab)  # exact denominators for the whole step
        parts: dict[str, torch.Tensor] = {}
        for i, (batch, labels) in enumerate(zip(micro, targets, strict=True)):
            with engine.accumulating(last=i == len(micro) - 1), engine.autocast():
                inputs = {k: v for k, v in batch.items() if k in MODEL_INPUTS}
                out = step_loss(engine.model, inputs, labels, counts)
            engine.backward(out.total)
            # Sums over micro-batches of per-step-normalised terms = the step's values.
            for name, value in {"loss": out.total, "ce": out.ce, **out.parts}.items():
                parts[name] = parts.get(name, 0) + value.detach()
        grad_norm = engine.step()
        divergence.watch(step, parts["loss"])

        last = step == steps
        do_log = step % spec.train.log_every == 0 or last
        do_ckpt = last or bool(
            spec.train.checkpoint_every and step % spec.train.checkpoint_every == 0
        )
        do_eval = do_ckpt or bool(spec.train.eval_every and step % spec.train.eval_every == 0)
        if not (do_log or do_eval):
            continue  # nothing to say this step
        metrics: dict[str, Any] = {"step": step, "lr": engine.lr(), "resumed_from": start_step}
        if do_log:
            now = time.perf_counter()
            metrics.update(parts)  # tensors: the log's thread turns them into numbers
            metrics["grad_norm"] = grad_norm
            metrics["step_time_s"] = (now - t_last) / spec.train.log_every
            t_last = now
        if not do_eval:
            steplog.put(metrics)  # no report, so no barrier and no wait on the file
            continue
        divergence.check()  # before anything diverged is evaluated or saved
        metrics = plain(metrics)  # Ray takes numbers; an evaluation syncs anyway
        engine.model.eval()
        # The whole model, collective-free (ZeRO-3: a copy from the gathered parameters): the
        # one evaluated is the one a checkpoint saves.
        with engine.full_model() as full:
            scores, answers = evaluate_sharded(full, tokenizer, task.eval, spec, rank, world)
            metrics.update(scores)
            if last and steplog.files is not None:
                steplog.files.write_predictions(answers)  # the run's final answers
            metrics.update(
                eval_losses(full, loss_fn, eval_rows, vocab, spec, tokenizer.pad_token_id)
            )
            engine.model.train()
            t_last = time.perf_counter()  # step_time_s measures training, not evaluation
            if do_ckpt:
                name = report_with_checkpoint(engine, full, tokenizer, spec, metrics, rank)
                if steplog.files is not None:
                    # Ray Train keeps a reported checkpoint at <storage>/<run name>/<dir name>.
                    where = f"{steplog.files.root}/{config['run_name']}/{name}"
                    metrics["checkpoint"] = steplog.files.to_uri(where)
            else:
                ray.train.report(metrics)
        steplog.put(metrics)
    steplog.flush()


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
        wrote = any(Path(tmp).iterdir())
        checkpoint = ray.train.Checkpoint.from_directory(tmp) if wrote else None
        ray.train.report(metrics, checkpoint=checkpoint, checkpoint_dir_name=name)
    return name
