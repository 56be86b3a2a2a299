"""The training loop each Ray Train worker runs, top to bottom.

    1. context: rank, device, threads, seed, precision
    2. model + tokenizer (from the latest checkpoint when Ray restarted us) + numeric loss
    3. data: the task's examples, tokenised, this rank's shard
    4. optimizer and schedule; DDP (Ray Train) or a DeepSpeed ZeRO engine
    5. loop: accumulate micro-batches, step, log the loss parts (rank 0, no barrier)
    6. evaluate (every eval_every, at checkpoints, at the end) and checkpoint with metrics;
       a loss that became inf or NaN fails the run there instead (jobs/train/divergence.py)

`train_loop_per_worker` is those steps in order; each step's work is a function below it,
in the same order. Every worker calls `ray.train.report` the same number of times (it is a
barrier): at evaluations and checkpoints only. Log steps go from rank 0 to `metrics.jsonl`
directly.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ray.train
import torch
from transformers import PreTrainedModel

from jobs.data import Example, load_task
from jobs.data.tokenize import MODEL_INPUTS, Row, collate, encode_example
from jobs.losses import BatchCounts, NumericVocab, build_loss, shift_labels
from jobs.losses.core import NumericLoss
from jobs.losses.head import HeadLoss
from jobs.modeling.adapters import inner_model
from jobs.modeling.model import load_checkpoint_model, load_model_and_tokenizer, load_tokenizer_for
from jobs.modeling.vision import VisionInputs
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec, TrainSpec
from jobs.tracking.job import RunLog
from jobs.train.checkpoint import checkpoint_step
from jobs.train.divergence import Divergence
from jobs.train.engine import Engine, build_engine
from jobs.train.evaluation import evaluate, report
from jobs.train.loop_config import LoopConfig
from jobs.train.pause import PauseWatch, load_rng_state, quiet_rng
from jobs.train.steplog import StepLog, plain
from jobs.train.worker import Job, Worker, start_worker

Batch = dict[str, torch.Tensor]


def train_loop_per_worker(train_loop_config: dict[str, Any]) -> None:
    config = LoopConfig.from_ray(train_loop_config)  # the driver's (jobs/train/runner.py)
    spec = config.spec

    # 1. context ---------------------------------------------------------------------
    worker = start_worker(spec)

    # 2. model, tokenizer, loss (resume from Ray's latest checkpoint if there is one) --
    resume = ray.train.get_checkpoint()
    model, tokenizer, start_step = load_model(spec, resume)
    vocab = NumericVocab.from_tokenizer(tokenizer)
    loss_fn = build_loss(spec.loss, vocab).to(worker.device)

    # 3. data: every rank tokenises the same list (deterministic) and keeps its shard ---
    job, n_train = tokenised_job(spec, worker, model, tokenizer, vocab, loss_fn)
    steps = total_steps(spec, n_train, worker.world)
    batches = micro_batches(
        job.train_rows, spec.train.batch_size, tokenizer.pad_token_id, spec.train.seed
    )

    # 4. optimizer, schedule, distributed wrapper --------------------------------------
    engine: Engine = build_engine(model, spec, steps, worker.device, worker.precision)
    if resume is not None:
        consumed = start_step * spec.train.grad_accum
        resume_engine(engine, resume, batches, consumed, worker.rank)
    step_loss = head_loss(spec, loss_fn, engine)

    # 5. loop: accumulate micro-batches, step, log (rank 0 writes, no barrier) ---------
    steplog = open_steplog(config, worker.rank)
    divergence = Divergence(worker.device)
    timer = Timer()
    pause = PauseWatch(config.pause_uri, worker.rank, worker.world)
    for step in range(start_step + 1, steps + 1):
        parts, grad_norm = train_step(job, engine, step_loss, batches)
        divergence.watch(step, parts["loss"])
        due = Due.at(step, steps, spec.train)
        # Asked to pause (jobs/train/pause.py): this step evaluates and checkpoints, then the
        # run ends. An evaluation due anyway draws random numbers as it would have.
        pausing = not due.last and pause.requested()
        quiet, due = pausing and not due.evaluate, due.paused() if pausing else due
        if not (due.log or due.evaluate):
            continue  # nothing to say this step
        metrics: dict[str, Any] = {"step": step, "lr": engine.lr(), "resumed_from": start_step}
        if pausing:
            metrics["paused"] = True  # the runner reads the last report: a paused run
        if due.log:
            metrics.update(parts)  # tensors: the log's thread turns them into numbers
            metrics["grad_norm"] = grad_norm
            metrics["step_time_s"] = timer.lap() / spec.train.log_every

        # 6. evaluate and checkpoint: every rank (a report is a barrier) ----------------
        if due.evaluate:
            divergence.check()  # before anything diverged is evaluated or saved
            metrics = plain(metrics)  # Ray takes numbers; an evaluation syncs anyway
            metrics["precision"] = worker.precision  # `auto` resolved: provenance reads it
            engine.model.eval()
            # The whole model, collective-free (ZeRO-3: a copy from the gathered parameters):
            # the one evaluated is the one a checkpoint saves.
            with quiet_rng(quiet), engine.full_model() as full:
                metrics.update(evaluate(job, full, steplog.files if due.last else None))
                engine.model.train()
                timer.restart()  # step_time_s measures training, not evaluation
                files, run_name = steplog.files, config.run_name
                where = report(job, engine, full, metrics, due.checkpoint, files, run_name)
                if where is not None:
                    metrics["checkpoint"] = where
        steplog.put(metrics)  # a log step alone: no report, so no barrier, no wait on the file
        if pausing:
            break
    steplog.flush()


# ---- 2. model ----------------------------------------------------------------------------


def load_model(spec: JobSpec, resume: ray.train.Checkpoint | None) -> tuple[Any, Any, int]:
    """The model and tokenizer, and the step they are at: 0 from the spec's source, or the
    checkpoint's step when Ray restarted the run from one."""
    if resume is None:
        model, tokenizer = load_model_and_tokenizer(spec.model, seed=spec.train.seed)
        return model, tokenizer, 0
    tokenizer = load_tokenizer_for(spec.model)
    with resume.as_directory() as ckpt_dir:
        # An adapter job's checkpoint: the verified base + the adapter, trainable again.
        model = load_checkpoint_model(Path(ckpt_dir), trainable=True)
        return model, tokenizer, checkpoint_step(Path(ckpt_dir))


# ---- 3. data -----------------------------------------------------------------------------


def tokenised_job(
    spec: JobSpec,
    worker: Worker,
    model: PreTrainedModel,
    tokenizer: Any,
    vocab: NumericVocab,
    loss_fn: NumericLoss,
) -> tuple[Job, int]:
    """The job with this rank's shard of the training rows and the whole held-out set
    tokenised, and the number of training examples over all ranks."""
    task = load_task(spec.data)
    vision = VisionInputs.of(inner_model(model))  # None for a text model

    def encode(example: Example) -> Row:
        return encode_example(
            tokenizer, example, spec.data.max_length, spec.model.use_chat_template, vision
        )

    rows = [encode(ex) for ex in task.train[worker.rank :: worker.world]]
    if len(rows) < spec.train.batch_size:
        raise ValueError(
            f"train.batch_size: {spec.train.batch_size} is more than this worker's "
            f"{len(rows)} training examples (data.train_size / scaling.num_workers)"
        )
    eval_rows = [encode(ex) for ex in task.eval]
    job = Job(spec, worker, tokenizer, vocab, loss_fn, rows, task.eval, eval_rows)
    return job, len(task.train)


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


# ---- 4. optimizer, schedule, distributed wrapper ----------------------------------------


def resume_engine(
    engine: Engine,
    resume: ray.train.Checkpoint,
    batches: Iterator[Batch],
    consumed: int,
    rank: int,
) -> None:
    """Optimizer and schedule state from the checkpoint's folder (DeepSpeed: each rank its
    shard) and this rank's random state; the batches already `consumed` skipped, so a
    resumed run sees the same order."""
    with resume.as_directory() as ckpt_dir:
        engine.load_state(Path(ckpt_dir))
        load_rng_state(Path(ckpt_dir), rank)  # last: model and engine building drew from it
    for _ in range(consumed):
        next(batches)


def head_loss(spec: JobSpec, loss_fn: NumericLoss, engine: Engine) -> HeadLoss:
    """The loss from hidden states in chunks when the head allows (no [tokens, V] logits);
    ZeRO-3 partitions the head's weight outside its own forward, so it keeps the logits."""
    fused = spec.train.fused_linear_loss and not (
        spec.scaling.deepspeed is not None and spec.scaling.deepspeed.stage == 3
    )
    # An adapter's wrapper hides the head: the model inside has it (LoRA leaves it plain).
    return HeadLoss(loss_fn, inner_model(engine.unwrapped), enabled=fused)


# ---- 5. loop -----------------------------------------------------------------------------


def open_steplog(config: LoopConfig, rank: int) -> StepLog:
    """Rank 0 writes every metrics row; `run_uri` is None where Ray's reports are the record
    (Tune trials). With tracking on, the same writer thread sends each row to the job's
    MLflow run."""
    run_uri, ref = config.run_uri, config.tracking
    tracked = RunLog(ref.uri, ref.run_id) if rank == 0 and run_uri and ref else None
    return StepLog(
        RunFiles.at(run_uri) if rank == 0 and run_uri else None,
        tracked.log_rows if tracked else None,
    )


def train_step(
    job: Job, engine: Engine, step_loss: HeadLoss, batches: Iterator[Batch]
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """One optimizer step over `grad_accum` micro-batches: the step's loss parts (on the
    device) and the gradient norm."""
    device = job.worker.device
    micro = [
        {k: v.to(device) for k, v in next(batches).items()}
        for _ in range(job.spec.train.grad_accum)
    ]
    targets = [shift_labels(b["labels"]) for b in micro]
    counts = BatchCounts.of(targets, job.vocab)  # exact denominators for the whole step
    parts: dict[str, torch.Tensor] = {}
    for i, (batch, labels) in enumerate(zip(micro, targets, strict=True)):
        with engine.accumulating(last=i == len(micro) - 1), engine.autocast():
            inputs = {k: v for k, v in batch.items() if k in MODEL_INPUTS}
            out = step_loss(engine.model, inputs, labels, counts)
        engine.backward(out.total)
        # Sums over micro-batches of per-step-normalised terms = the step's values.
        for name, value in {"loss": out.total, "ce": out.ce, **out.parts}.items():
            parts[name] = parts.get(name, 0) + value.detach()
    return parts, engine.step()


@dataclass(frozen=True)
class Due:
    """What a step does besides training: log, evaluate, checkpoint; and if it is the last."""

    log: bool
    evaluate: bool
    checkpoint: bool
    last: bool

    @classmethod
    def at(cls, step: int, steps: int, train: TrainSpec) -> Due:
        last = step == steps
        checkpoint = last or bool(train.checkpoint_every and step % train.checkpoint_every == 0)
        return cls(
            log=step % train.log_every == 0 or last,
            evaluate=checkpoint or bool(train.eval_every and step % train.eval_every == 0),
            checkpoint=checkpoint,
            last=last,
        )

    def paused(self) -> Due:
        """This step as the one a pause stops at: logged, evaluated and checkpointed."""
        return replace(self, log=True, evaluate=True, checkpoint=True)


class Timer:
    """Seconds of training between logged steps: evaluations restart it."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        elapsed, self.start = now - self.start, now
        return elapsed

    def restart(self) -> None:
        self.start = time.perf_counter()
