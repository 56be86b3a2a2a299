"""train.precision: `auto` resolved from what the device has (both branches, the capability
checks replaced), explicit bf16 refused where it cannot run, the precision recorded in the
run's provenance; and every loss in bf16 (autocast and bf16 weights) finite and close to
fp32 on a tiny model, with float32 master weights keeping updates bf16 would round away."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from jobs.data import load_task
from jobs.data.tokenize import MODEL_INPUTS, collate, encode_example
from jobs.losses import BatchCounts, NumericVocab, build_loss, shift_labels
from jobs.losses.head import HeadLoss
from jobs.modeling import precision as prec
from jobs.modeling.model import load_model_and_tokenizer
from jobs.records.models import Decoding, Provenance, RunResult
from jobs.spec import LOSS_NAMES, DataSpec, JobSpec, LossSpec, ModelSpec
from jobs.train import worker
from jobs.train.master import MasterWeights
from jobs.train.runner import finished

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def spec(precision: str, **extra: object) -> JobSpec:
    return JobSpec.model_validate(
        {"name": "p", "model": {"source": "random:tiny-char"}, "train": {"precision": precision}}
        | extra
    )


@pytest.fixture
def cpu_has(monkeypatch: pytest.MonkeyPatch) -> object:
    """cpu_has(flags, onednn): the CPU's flags and oneDNN's bf16 support, as given."""

    def set_(flags: set[str], onednn: bool = True) -> None:
        monkeypatch.setattr(prec, "cpu_flags", lambda: frozenset(flags))
        monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: onednn)

    return set_


def test_auto_is_bf16_on_a_cpu_with_bf16_units_and_fp32_without(cpu_has: object) -> None:
    cpu_has({"avx512f", "amx_bf16"})  # type: ignore[operator]
    assert prec.resolve_precision("auto", CPU) == prec.AUTO_BF16 == "bf16"
    assert prec.serving_dtype(CPU) == torch.bfloat16
    cpu_has({"fp", "asimd", "bf16"})  # type: ignore[operator]  # Arm's flag
    assert prec.resolve_precision("auto", CPU) == "bf16"
    # AVX512 alone: oneDNN emulates bf16 there; auto does not choose it, explicit bf16 may.
    cpu_has({"avx512f", "avx512bw"})  # type: ignore[operator]
    assert prec.resolve_precision("auto", CPU) == "fp32"
    assert prec.serving_dtype(CPU) == torch.float32
    assert worker.worker_precision(spec("bf16"), CPU) == "bf16"
    cpu_has({"avx512_bf16"}, onednn=False)  # type: ignore[operator]  # no kernels: no bf16
    assert prec.resolve_precision("auto", CPU) == "fp32"
    with pytest.raises(worker.PrecisionUnsupportedError, match=r"train\.precision: this CPU"):
        worker.worker_precision(spec("bf16_weights"), CPU)
    for explicit in ("fp32", "bf16", "bf16_weights"):  # explicit choices are kept as given
        assert prec.resolve_precision(explicit, CPU) == explicit


def test_auto_on_gpus_asks_for_bf16_without_emulation(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[bool] = []

    def supported(including_emulation: bool = True) -> bool:
        asked.append(including_emulation)
        return including_emulation or native  # emulated bf16 counts only when asked

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", supported)
    native = True  # an Ampere or later GPU
    assert prec.resolve_precision("auto", CUDA) == "bf16" and asked == [False]
    native = False  # a V100: bf16 only emulated
    assert prec.resolve_precision("auto", CUDA) == "fp32"
    assert worker.worker_precision(spec("bf16"), CUDA) == "bf16"  # explicit: allowed, emulated
    # DeepSpeed's bf16 needs GPUs: auto on CPU is fp32 for it whatever the CPU has.
    ds = spec("auto", scaling={"deepspeed": {"stage": 2}})
    assert worker.worker_precision(ds, CPU) == "fp32"


def test_cpu_flags_read_from_cpuinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "cpuinfo"
    monkeypatch.setattr(prec, "CPUINFO", info)
    for text, flags in [
        ("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16\n", {"fpu", "avx512f", "avx512_bf16"}),
        ("processor\t: 0\nFeatures\t: fp asimd bf16\n", {"fp", "asimd", "bf16"}),
        ("processor\t: 0\n", set()),
    ]:
        info.write_text(text)
        prec.cpu_flags.cache_clear()
        assert prec.cpu_flags() == flags
    info.unlink()  # unreadable: nothing assumed
    prec.cpu_flags.cache_clear()
    assert prec.cpu_flags() == frozenset()
    prec.cpu_flags.cache_clear()


def test_spec_names_the_choices_and_provenance_records_the_one_used() -> None:
    assert spec("auto").train.precision == "auto"
    assert JobSpec.model_validate({"name": "p"}).train.precision == "fp32"  # the default
    with pytest.raises(ValidationError, match=r"train\.precision"):
        spec("fp16")
    with pytest.raises(ValidationError, match="DeepSpeed bf16 needs GPUs"):
        spec("bf16_weights", scaling={"deepspeed": {"stage": 2}})
    decoding = Decoding(number_first=True, max_new_tokens=8, use_chat_template=None)
    origin = Provenance(
        numtune_version="0", git_commit="c", spec=spec("auto"), data_sha256={}, decoding=decoding
    )
    ran = RunResult(status="succeeded", metrics={"step": 3, "precision": "bf16"})
    done = finished(origin, ran, "predictions.jsonl")
    assert (done.precision, done.predictions, done.spec.train.precision) == (
        "bf16", "predictions.jsonl", "auto",
    )  # fmt: skip
    assert finished(origin, RunResult.failed("oom", "x"), None).precision is None


@pytest.fixture(scope="module")
def tiny() -> tuple[torch.nn.Module, NumericVocab, dict[str, torch.Tensor]]:
    model, tokenizer = load_model_and_tokenizer(ModelSpec(source="random:tiny-char"), seed=0)
    task = load_task(DataSpec(task="units", train_size=8, eval_size=1, max_length=96))
    rows = [encode_example(tokenizer, ex, 96, False) for ex in task.train]
    return model, NumericVocab.from_tokenizer(tokenizer), collate(rows, tokenizer.pad_token_id)


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_every_loss_in_bf16_is_finite_and_close_to_fp32(
    tiny: tuple[torch.nn.Module, NumericVocab, dict[str, torch.Tensor]], name: str
) -> None:
    model, vocab, batch = tiny
    labels = shift_labels(batch["labels"])
    counts = BatchCounts.of([labels], vocab)
    inputs = {k: v for k, v in batch.items() if k in MODEL_INPUTS}
    loss_fn = build_loss(LossSpec.model_validate({"name": name, "weight": 1.0}), vocab)
    bf16_model = copy.deepcopy(model).to(torch.bfloat16)

    def run(net: torch.nn.Module, autocast: bool, fused: bool) -> dict[str, torch.Tensor]:
        torch.manual_seed(0)  # ntil's Gumbel noise: the same draw in every mode
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = HeadLoss(loss_fn, net, enabled=fused)(net, inputs, labels, counts)
        out.total.backward()
        grads = [p.grad for p in net.parameters() if p.grad is not None]
        assert grads and all(bool(torch.isfinite(g).all()) for g in grads)
        net.zero_grad(set_to_none=True)
        assert out.total.dtype == torch.float32  # the loss is reduced in fp32 in every mode
        parts = {"total": out.total, "ce": out.ce, **out.parts}
        return {k: v.detach() for k, v in parts.items()}

    want = run(model, autocast=False, fused=True)
    assert set(want) - {"total", "ce"} or name == "ce"  # a numeric loss reports its term
    for got in (
        run(model, autocast=True, fused=True),
        run(model, autocast=True, fused=False),
        run(bf16_model, autocast=False, fused=True),
    ):
        assert got.keys() == want.keys()
        for part, value in got.items():
            assert torch.isfinite(value), (name, part)
            # bf16 keeps 8 bits of mantissa: a few parts in a thousand per op, summed.
            assert float(value) == pytest.approx(float(want[part]), rel=3e-2, abs=3e-3), part


def test_master_weights_keep_updates_below_bf16_spacing() -> None:
    weight = torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16))
    master = MasterWeights([weight])
    assert master.params[0].dtype == torch.float32
    optimizer = torch.optim.SGD(master.params, lr=1e-3)
    for _ in range(10):  # each step moves 1e-3: under bf16's spacing at 1.0 (2^-7 above 1)
        weight.grad = torch.ones(4, dtype=torch.bfloat16)
        master.pull_grads()
        assert weight.grad is None and master.params[0].grad is not None
        optimizer.step()
        master.push_weights()
    # Plain bf16 SGD would stay at 1.0 forever; the master copy moved by 0.01 in all.
    assert master.params[0].detach() == pytest.approx(torch.full((4,), 0.99), abs=1e-6)
    moved = float(weight.detach()[0])
    assert moved == pytest.approx(0.99, abs=4e-3) and moved < 1.0
