"""Training jobs on a real local Ray: DDP, every loss, DeepSpeed, a killed worker; and
DeepSpeed's sharded training state saved and loaded back by two gloo processes."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from jobs.data import load_task
from jobs.data.tokenize import encode_example
from jobs.infer.evaluate import answers_for_spec, score, score_records
from jobs.losses import NumericVocab, build_loss
from jobs.modeling.model import load_checkpoint_model, load_model_and_tokenizer, load_tokenizer_for
from jobs.records.run_files import RunFiles
from jobs.spec import LOSS_NAMES, JobSpec
from jobs.train.engine import build_engine
from jobs.train.evaluation import eval_losses
from jobs.train.runner import build_trainer, run_job
from jobs.train.zero import DeepSpeedEngine
from service.cli.processes import free_ports
from tests.support.training import metric_rows, run_killing_a_worker, tiny_spec

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CHECKPOINT_FILES = {"model.safetensors", "config.json", "spec.json", "metrics.json"}


def test_two_ddp_workers_learn_and_checkpoint(ray_cluster: str, storage: Path) -> None:
    spec = tiny_spec(train={"steps": 30, "eval_every": 10, "checkpoint_every": 10})
    result = run_job(spec, "ddp-tiny", str(storage))
    assert result.status == "succeeded", result.detail

    rows = metric_rows(RunFiles.for_job("ddp-tiny", str(storage)))
    losses = [r["loss"] for r in rows if "loss" in r]
    assert len(losses) == 30
    # The loss falls: the last five steps average well below the first five.
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5
    assert {"ce", "mmd", "smooth", "eval_exact_match", "eval_mae"} <= set().union(*rows)

    # Every kept checkpoint is a complete folder; Ray keeps the best two by the eval metric
    # plus, always, the latest one (it is what a restart resumes from).
    assert result.best_checkpoint is not None
    best = Path(result.best_checkpoint)
    assert {p.name for p in best.iterdir()} >= CHECKPOINT_FILES
    assert any(p.name.startswith("tokenizer") for p in best.iterdir())
    assert json.loads((best / "spec.json").read_text())["loss"]["name"] == "smmd"
    reported = [r for r in rows if "checkpoint" in r]
    assert len(reported) == 3
    # Ray ranks equal scores by report order, the later one above the earlier.
    ranked = sorted(reversed(reported), key=lambda r: -r["eval_exact_match"])
    expected = {Path(r["checkpoint"]).name for r in ranked[:2]} | {
        Path(reported[-1]["checkpoint"]).name
    }
    kept = {
        p.name for p in best.parent.iterdir() if p.is_dir() and p.name.startswith("checkpoint_")
    }
    assert kept == expected

    # The final evaluation's answers: both workers' shares, back in the held-out set's order,
    # judged as the final metrics counted them; and what produced the run.
    answers = RunFiles.for_job("ddp-tiny", str(storage)).read_predictions()
    assert answers is not None
    assert [r.prompt for r in answers] == [ex.prompt for ex in load_task(spec.data).eval]
    final = {f"eval_{k}": v for k, v in score_records(answers).items()}
    assert final == pytest.approx({k: result.metrics[k] for k in final}, nan_ok=True)
    origin = result.provenance
    assert origin is not None and origin.predictions == "predictions.jsonl"
    assert origin.spec.loss.name == "smmd" and origin.spec.train.steps == 30
    assert origin.decoding.number_first and origin.decoding.max_new_tokens == 8
    assert origin.data_sha256 == {}  # a generated task reads no files


@pytest.mark.parametrize("loss", LOSS_NAMES)
def test_every_loss_trains(ray_cluster: str, storage: Path, loss: str) -> None:
    # Ray Train's in-process mode runs the same worker loop without the 15 s start-up.
    spec = tiny_spec(
        loss={"name": loss},
        train={"steps": 4, "eval_every": 4, "checkpoint_every": 4, "warmup_steps": 0},
        data={"train_size": 64, "eval_size": 4},
    )
    fit = build_trainer(spec, RunFiles.for_job(f"loss-{loss}", str(storage)), in_process=True).fit()
    assert fit.error is None
    assert math.isfinite(fit.metrics["loss"]) and fit.metrics["loss"] > 0
    assert fit.metrics["step"] == 4
    numeric = set(fit.metrics) - {"loss", "ce", "lr", "step", "grad_norm", "resumed_from"}
    if loss == "ce":
        assert not any(k in numeric for k in ("emd", "mmd", "smooth", "mse"))
    else:
        assert numeric - {k for k in numeric if k.startswith("eval_") or k.endswith("_s")}


def _adam_moments(engine: DeepSpeedEngine) -> list[torch.Tensor]:
    """This rank's exp_avg and exp_avg_sq: the base AdamW's state over its ZeRO partition
    (flat fp32 tensors of about n_params / world elements)."""
    state = engine.ds.optimizer.optimizer.state
    return [s[k].clone() for s in state.values() for k in ("exp_avg", "exp_avg_sq")]


def _zero_state_round_trip(rank: int, port: int, base: str) -> None:
    """One of two gloo ranks, for ZeRO-2 then ZeRO-3 (one process start for both): two
    steps, save the state, load it into a fresh engine, compare."""
    env = {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": 2, "MASTER_PORT": port}
    os.environ.update({k: str(v) for k, v in env.items()} | {"MASTER_ADDR": "127.0.0.1"})
    dist.init_process_group("gloo", rank=rank, world_size=2)
    for stage in (2, 3):
        spec = tiny_spec(scaling={"deepspeed": {"stage": stage}})

        def engine(spec: JobSpec = spec) -> DeepSpeedEngine:
            model, _ = load_model_and_tokenizer(spec.model, seed=spec.train.seed)
            built = build_engine(model, spec, spec.train.steps or 0, torch.device("cpu"))
            assert isinstance(built, DeepSpeedEngine)
            return built

        trained = engine()
        ids = torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(rank))
        for _ in range(2):  # ids: [B, T] token ids, different on each rank
            trained.backward(trained.model(input_ids=ids, labels=ids).loss)
            trained.step()
        saved = _adam_moments(trained)
        assert saved and all(m.abs().sum() > 0 for m in saved)
        own = Path(base) / f"zero{stage}" / f"rank{rank}"
        trained.save_state(own, rank)
        dist.barrier()
        merged = Path(base) / f"zero{stage}" / "merged"  # what Ray Train makes of the folders
        shutil.copytree(own, merged, dirs_exist_ok=True)
        dist.barrier()

        resumed = engine()
        resumed.load_state(merged)
        loaded = _adam_moments(resumed)
        assert len(loaded) == len(saved), stage
        assert all(torch.equal(a, b) for a, b in zip(saved, loaded, strict=True)), stage
        assert resumed.lr() == trained.lr() and resumed.ds.global_steps == 2, stage
    dist.destroy_process_group()


def test_zero_state_loads_back_every_rank_shard(tmp_path: Path) -> None:
    mp.spawn(_zero_state_round_trip, args=(free_ports(1)[0], str(tmp_path)), nprocs=2)
    for stage in (2, 3):
        merged = tmp_path / f"zero{stage}" / "merged"
        shards = {p.name for p in (merged / "deepspeed" / "state").iterdir()}
        assert {f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in (0, 1)} <= shards
        assert not list(merged.rglob("*.py"))  # no code in a checkpoint


def _evaluate_alone(folder: Path, spec: JobSpec) -> dict[str, float]:
    """A checkpoint's consolidated model evaluated in this process as the two workers do: the
    same halves of the held-out set for generation, every row for the losses."""
    model = load_checkpoint_model(folder).eval()
    tokenizer = load_tokenizer_for(spec.model)
    held_out = load_task(spec.data).eval
    shards = [held_out[rank::2] for rank in range(2)]
    preds = [p for shard in shards for p in answers_for_spec(model, tokenizer, shard, spec)]
    truths = [ex.answer for shard in shards for ex in shard]
    metrics = {f"eval_{k}": v for k, v in score(preds, truths, spec.data.task).items()}
    vocab = NumericVocab.from_tokenizer(tokenizer)
    rows = [
        encode_example(tokenizer, ex, spec.data.max_length, spec.model.use_chat_template)
        for ex in held_out
    ]
    loss_fn = build_loss(spec.loss, vocab)
    return metrics | eval_losses(model, loss_fn, rows, vocab, spec, tokenizer.pad_token_id)


@pytest.mark.parametrize("stage", [None, 2, 3], ids=["ddp", "zero2", "zero3"])
def test_killed_worker_resumes_from_checkpoint(
    ray_cluster: str, storage: Path, stage: int | None
) -> None:
    scaling = {"deepspeed": {"stage": stage}} if stage else {}
    spec = tiny_spec(train={"steps": 40, "eval_every": 10, "checkpoint_every": 10}, scaling=scaling)
    rows = run_killing_a_worker(ray_cluster, spec, f"kill-{stage or 'ddp'}", storage)
    assert rows[-1]["step"] == 40
    # The restarted workers picked up from a saved checkpoint, not from scratch (the state
    # each rank loads back is checked tensor by tensor in test_zero_state_loads_back...).
    assert max(r["resumed_from"] for r in rows) >= 10
    last = [r for r in rows if "checkpoint" in r][-1]
    folder = Path(last["checkpoint"])
    assert {p.name for p in folder.iterdir()} >= CHECKPOINT_FILES
    # What it resumed from (each rank's shards: test_zero_state_loads_back...) is gone now
    # that the job succeeded: nothing resumes it again (jobs/train/checkpoint.py).
    assert not list(storage.glob("runs/*/**/trainer_state.pt"))
    assert not list(storage.glob("runs/*/**/deepspeed"))
    if stage == 3:
        # ZeRO-3 evaluates the model its checkpoint holds, gathered from both ranks' shards.
        alone = _evaluate_alone(folder, spec)
        assert alone == pytest.approx({k: last[k] for k in alone}, rel=1e-5)
