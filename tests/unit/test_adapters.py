"""LoRA adapters (jobs/modeling/adapters.py) on tiny random models: the spec, what trains, the fused
loss through the peft wrapper, adapter-only checkpoints and their verified base."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from pydantic import ValidationError

from jobs.losses import BatchCounts, NumericVocab, build_loss, shift_labels
from jobs.losses.head import HeadLoss
from jobs.modeling.adapters import (
    BaseChangedError,
    BaseMissingError,
    inner_model,
    is_adapter,
    tensor_digest,
)
from jobs.modeling.folders import save_pretrained_safetensors
from jobs.modeling.model import load_checkpoint_model, load_model_and_tokenizer
from jobs.records.models import TENSORS_KEY, BaseReference
from jobs.spec import JobSpec, LossSpec, ModelSpec, TrainSpec, TuneSpec
from jobs.train.checkpoint import save_checkpoint
from jobs.train.optim import build_optimizer

LORA = {"r": 4, "alpha": 8.0, "target_modules": ["q_proj", "v_proj"]}


def _spec(source: str = "random:tiny-char", **adapter: Any) -> JobSpec:
    return JobSpec(
        name="lora",
        model=ModelSpec.model_validate({"source": source, "adapter": {**LORA, **adapter}}),
        loss=LossSpec(name="smmd"),
        train=TrainSpec(steps=2, lr=0.05, weight_decay=0.0),
    )


def _batch(tokenizer: Any) -> dict[str, torch.Tensor]:
    ids = torch.tensor([tokenizer("12+30=42")["input_ids"], tokenizer("17+18=35")["input_ids"]])
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _logits(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(**batch).logits  # [B, T, V]


def _trained(spec: JobSpec) -> tuple[Any, Any]:
    """The spec's adapter model after two optimizer steps (so B is no longer zero)."""
    model, tokenizer = load_model_and_tokenizer(spec.model, seed=0)
    optimizer = build_optimizer(model, spec)
    batch = _batch(tokenizer)
    for _ in range(2):
        model(**batch).logits.float().pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    return model, tokenizer


@pytest.mark.parametrize(
    ("adapter", "field"),
    [
        ({"r": 0}, "model.adapter.r"),
        ({"alpha": 0}, "model.adapter.alpha"),
        ({"dropout": 1.0}, "model.adapter.dropout"),
        ({"target_modules": []}, "model.adapter.target_modules"),
        ({"target_modules": ["q proj"]}, "model.adapter.target_modules"),
        ({"type": "ia3"}, "model.adapter.type"),
        ({"rank": 4}, "model.adapter.rank"),
    ],
)
def test_a_bad_adapter_is_refused_naming_the_field(adapter: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate({"name": "x", "model": {"adapter": adapter}})
    assert field in str(info.value)


def test_default_spec_has_no_adapter_and_loads_a_plain_model() -> None:
    spec = JobSpec(name="x", model=ModelSpec(source="random:tiny-char"))
    assert spec.model.adapter is None
    model, _ = load_model_and_tokenizer(spec.model)
    assert not is_adapter(model)
    assert all(p.requires_grad for p in model.parameters())


def test_only_the_adapter_trains_and_the_base_stays_put() -> None:
    spec = _spec()
    model, tokenizer = load_model_and_tokenizer(spec.model, seed=0)
    assert is_adapter(model)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    # B starts at zero: the wrapped model answers exactly as its base.
    base, _ = load_model_and_tokenizer(ModelSpec(source="random:tiny-char"), seed=0)
    assert torch.equal(_logits(model, _batch(tokenizer)), _logits(base, _batch(tokenizer)))
    model, _ = _trained(spec)
    moved = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert moved and moved <= trainable
    # The optimizer holds the adapter alone: no moments for the frozen base.
    assert sum(
        p.numel() for g in build_optimizer(model, spec).param_groups for p in g["params"]
    ) == (sum(p.numel() for n, p in model.named_parameters() if n in trainable))


def test_fused_loss_reads_the_plain_head_through_the_wrapper() -> None:
    spec = _spec()
    model, tokenizer = _trained(spec)
    model.train()
    vocab = NumericVocab.from_tokenizer(tokenizer)
    loss_fn = build_loss(spec.loss, vocab)
    batch = _batch(tokenizer)
    labels = shift_labels(batch["input_ids"].clone())
    counts = BatchCounts.of([labels], vocab)
    fused = HeadLoss(loss_fn, inner_model(model))
    assert fused.fused and type(fused.head) is torch.nn.Linear
    plain = HeadLoss(loss_fn, inner_model(model), enabled=False)
    a, b = fused(model, batch, labels, counts), plain(model, batch, labels, counts)
    assert float(a.total.detach()) == pytest.approx(float(b.total.detach()), rel=1e-5)


def test_an_adapter_checkpoint_holds_the_adapter_and_its_base(tmp_path: Path) -> None:
    spec = _spec()
    model, tokenizer = _trained(spec)
    save_checkpoint(tmp_path, model=model, tokenizer=tokenizer, spec=spec, metrics={"step": 2})
    names = {p.name for p in tmp_path.iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json", "base.json", "spec.json"} <= names
    assert "model.safetensors" not in names and "README.md" not in names
    base = BaseReference.model_validate_json((tmp_path / "base.json").read_text())
    assert base.source == "random:tiny-char" and set(base.sha256) == {TENSORS_KEY}
    plain, _ = load_model_and_tokenizer(ModelSpec(source="random:tiny-char"), seed=0)
    assert base.sha256[TENSORS_KEY] == tensor_digest(plain)
    # The adapter is a few per cent of the model's bytes.
    full = save_pretrained_safetensors(plain, tokenizer, tmp_path / "full") / "model.safetensors"
    assert (tmp_path / "adapter_model.safetensors").stat().st_size < 0.05 * full.stat().st_size

    loaded = load_checkpoint_model(tmp_path)
    assert is_adapter(loaded)
    assert not any(p.requires_grad for p in loaded.parameters())
    batch = _batch(tokenizer)
    assert torch.allclose(_logits(loaded, batch), _logits(model, batch), atol=1e-6)
    resumed = load_checkpoint_model(tmp_path, trainable=True)
    assert {n for n, p in resumed.named_parameters() if p.requires_grad} == {
        n for n, p in model.named_parameters() if p.requires_grad
    }


def test_a_changed_or_missing_base_is_refused(tmp_path: Path) -> None:
    base_model, tokenizer = load_model_and_tokenizer(ModelSpec(source="random:tiny-char"), seed=0)
    base_dir = save_pretrained_safetensors(base_model, tokenizer, tmp_path / "base")
    spec = _spec(source=str(base_dir))
    model, tokenizer = _trained(spec)
    ckpt = tmp_path / "ckpt"
    save_checkpoint(ckpt, model=model, tokenizer=tokenizer, spec=spec, metrics={"step": 2})
    recorded = json.loads((ckpt / "base.json").read_text())
    assert recorded["source"] == str(base_dir) and set(recorded["sha256"]) == {"model.safetensors"}
    assert is_adapter(load_checkpoint_model(ckpt))  # the base as trained loads

    # Other weights under the same name: refused, naming the file.
    other, _ = load_model_and_tokenizer(ModelSpec(source="random:tiny-char"), seed=1)
    save_pretrained_safetensors(other, tokenizer, base_dir)
    with pytest.raises(BaseChangedError, match=r"model\.safetensors differ"):
        load_checkpoint_model(ckpt)
    # The base gone: refused, naming it.
    for path in base_dir.iterdir():
        path.unlink()
    base_dir.rmdir()
    with pytest.raises(BaseMissingError, match=r"base model .* cannot be loaded"):
        load_checkpoint_model(ckpt)


def test_a_random_base_with_another_checksum_is_refused(tmp_path: Path) -> None:
    spec = _spec()
    model, tokenizer = _trained(spec)
    save_checkpoint(tmp_path, model=model, tokenizer=tokenizer, spec=spec, metrics={"step": 2})
    recorded = json.loads((tmp_path / "base.json").read_text())
    recorded["seed"] = 1  # the same preset from another seed: other weights
    (tmp_path / "base.json").write_text(json.dumps(recorded))
    with pytest.raises(BaseChangedError, match=TENSORS_KEY):
        load_checkpoint_model(tmp_path)


def test_target_modules_that_match_nothing_name_the_field() -> None:
    spec = _spec(target_modules=["no_such_proj"])
    with pytest.raises(ValueError, match=r"model\.adapter\.target_modules"):
        load_model_and_tokenizer(spec.model)


def test_a_sweep_may_vary_the_adapters_rank_and_alpha() -> None:
    base = {"name": "b", "model": {"source": "random:tiny-char", "adapter": LORA}}
    base["train"] = {"eval_every": 5}
    sweep = TuneSpec.model_validate(
        {
            "name": "t",
            "base": base,
            "space": {
                "adapter.r": {"kind": "loguniform", "low": 1, "high": 16},
                "adapter.alpha": {"kind": "choice", "values": [4, 32]},
            },
        }
    )
    trial = sweep.trial_spec({"adapter.r": 5.6, "adapter.alpha": 32})
    assert trial.model.adapter is not None
    assert (trial.model.adapter.r, trial.model.adapter.alpha) == (6, 32.0)
    assert trial.model.adapter.target_modules == ("q_proj", "v_proj")  # the rest kept
    without = {**base, "model": {"source": "random:tiny-char"}}
    with pytest.raises(ValidationError, match=r"need base\.model\.adapter"):
        TuneSpec.model_validate(
            {"name": "t", "base": without, "space": {"adapter.r": {"kind": "grid", "values": [2]}}}
        )
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        TuneSpec.model_validate(
            {"name": "t", "base": base, "space": {"adapter.r": {"kind": "grid", "values": [0]}}}
        )


def test_a_job_whose_base_is_gone_or_changed_fails_as_model_unavailable() -> None:
    from ray.train import WorkerGroupError

    from jobs.train.failures import failure_code

    for error in (BaseMissingError("base 'x'"), BaseChangedError("base 'x'")):
        # as the driver gets it from Ray Train: the worker's exception, by rank
        assert failure_code(WorkerGroupError("rank 0 failed", {0: error})) == "model_unavailable"


def test_merge_exports_a_full_model_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from jobs.__main__ import main

    spec = _spec()
    model, tokenizer = _trained(spec)
    save_checkpoint(tmp_path / "ckpt", model=model, tokenizer=tokenizer, spec=spec, metrics={})
    assert main(["merge", str(tmp_path / "ckpt"), str(tmp_path / "full")]) == 0
    full = load_checkpoint_model(tmp_path / "full")
    assert not is_adapter(full) and (tmp_path / "full" / "model.safetensors").is_file()
    batch = _batch(tokenizer)
    assert torch.allclose(_logits(full, batch), _logits(model, batch), atol=1e-5)
    # A folder without an adapter is refused, saying why (exit 2).
    assert main(["merge", str(tmp_path / "full"), str(tmp_path / "again")]) == 2
    assert "no base.json" in capsys.readouterr().err
