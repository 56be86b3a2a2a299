"""LoRA against a full fine-tune: step time and peak memory, registry bytes per version, and
serving latency switching between two adapters on one base against two full models.

    .venv/bin/python -m bench.lora [--model bundled:smollm2-135m] [--steps 6] [--batch 8]

Training rows run each in its own process (peak RSS is a per-process high-water mark): the
worker loop's core (same data, fused loss, AdamW over what trains), no Ray. Bytes: the
safetensors weights of a full checkpoint against an adapter checkpoint, and each whole
folder. Serving: one process, requests alternating between two versions, each a greedy
8-token completion; two adapters share one base (service/serving/adapters.py), two full
models are two copies. Writes bench/results/lora.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from jobs.data import load_task
from jobs.data.tokenize import encode_example
from jobs.infer import NumericPredictor
from jobs.losses import BatchCounts, NumericVocab, build_loss, shift_labels
from jobs.losses.head import HeadLoss
from jobs.modeling.adapters import inner_model, merged
from jobs.modeling.model import load_adapter, load_model_and_tokenizer, load_tokenizer_for
from jobs.spec import JobSpec
from jobs.train.checkpoint import save_checkpoint
from jobs.train.loop import micro_batches
from jobs.train.optim import build_optimizer
from tests.support.serving import random_lora

RESULTS = Path(__file__).resolve().parent / "results"
LORA = {"r": 8, "alpha": 16.0, "target_modules": ["q_proj", "v_proj"]}


def make_spec(model: str, *, adapter: bool, steps: int = 6, batch: int = 8) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "lora-bench",
            "model": {"source": model, "use_chat_template": False,
                      "adapter": LORA if adapter else None},
            "data": {"train_size": max(64, batch * 4), "eval_size": 4, "max_length": 96},
            "loss": {"name": "smmd"},
            "train": {"steps": steps, "batch_size": batch, "lr": 1e-4, "schedule": "constant"},
        }
    )  # fmt: skip


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def train_row(spec: JobSpec, warmup: int = 2) -> dict[str, Any]:
    """Median seconds per optimizer step after `warmup`, and the process's peak RSS."""
    torch.manual_seed(0)
    model, tokenizer = load_model_and_tokenizer(spec.model, seed=0)
    loaded_mb = _rss_mb()
    vocab = NumericVocab.from_tokenizer(tokenizer)
    step_loss = HeadLoss(build_loss(spec.loss, vocab), inner_model(model))
    optimizer = build_optimizer(model, spec)
    rows = [
        encode_example(tokenizer, ex, spec.data.max_length, False)
        for ex in load_task(spec.data).train
    ]
    batches = micro_batches(rows, spec.train.batch_size, tokenizer.pad_token_id, 0)
    times = []
    for _ in range(spec.train.steps or 1):
        batch = next(batches)
        labels = shift_labels(batch["labels"])
        start = time.perf_counter()
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
        step_loss(model, inputs, labels, BatchCounts.of([labels], vocab)).total.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {
        "adapter": spec.model.adapter is not None,
        "step_s": statistics.median(times[warmup:]),
        "peak_rss_mb": _rss_mb(),
        "rss_after_load_mb": loaded_mb,
        "trainable_params": trainable,
        "fused": step_loss.fused,
    }


def _weights(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors"))


def _folder(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def adapter_checkpoint(model_source: str, out: Path, seed: int) -> Path:
    """An adapter checkpoint whose B is random (as after training), so it changes answers."""
    return random_lora(make_spec(model_source, adapter=True), out, seed=seed, scale=0.02)


def bytes_rows(model_source: str, tmp: Path) -> dict[str, Any]:
    adapter = adapter_checkpoint(model_source, tmp / "adapter", seed=1)
    spec = make_spec(model_source, adapter=False)
    model, tokenizer = load_model_and_tokenizer(spec.model, seed=0)
    full = tmp / "full"
    save_checkpoint(full, model=model, tokenizer=tokenizer, spec=spec, metrics={"step": 1})
    return {
        "full_weights_bytes": _weights(full),
        "full_folder_bytes": _folder(full),
        "adapter_weights_bytes": _weights(adapter),
        "adapter_folder_bytes": _folder(adapter),
        "adapter_weights_fraction": _weights(adapter) / _weights(full),
    }


def serving_rows(model_source: str, tmp: Path, requests: int) -> dict[str, Any]:
    from service.serving.adapters import AdapterHost, activate

    folders = [adapter_checkpoint(model_source, tmp / f"a{i}", seed=i + 1) for i in range(2)]
    host = AdapterHost()
    adapters = [host.load(f"bench:{i}", f) for i, f in enumerate(folders)]
    tokenizer = load_tokenizer_for(make_spec(model_source, adapter=False).model)
    # The same two models as full versions: each adapter merged into its own base copy.
    fulls = [NumericPredictor(merged(load_adapter(f)), tokenizer) for f in folders]
    prompt = ["What is 317 + 24?"]

    def latencies(predictors: list[NumericPredictor]) -> list[float]:
        out = []
        for i in range(requests):
            p = predictors[i % 2]
            start = time.perf_counter()
            activate(p)
            p.complete(prompt, max_new_tokens=8)
            out.append(time.perf_counter() - start)
        return out[2:]  # the first of each: warm-up

    a, f = latencies(adapters), latencies(fulls)
    same = latencies([adapters[0], adapters[0]] * (requests // 2))  # no switch between calls
    switches = []
    for i in range(20):
        start = time.perf_counter()
        activate(adapters[i % 2])
        switches.append(time.perf_counter() - start)
    param_mb = lambda m: sum(p.numel() * p.element_size() for p in m.parameters()) / 2**20  # noqa: E731
    return {
        "adapters_median_s": statistics.median(a),
        "full_models_median_s": statistics.median(f),
        "one_adapter_median_s": statistics.median(same),
        "switch_median_s": statistics.median(switches),
        "adapters_params_mb": param_mb(adapters[0].model),
        "full_models_params_mb": sum(param_mb(p.model) for p in fulls),
        "bases_loaded": host.bases_loaded,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="bundled:smollm2-135m")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--requests", type=int, default=12)
    parser.add_argument("--child", choices=["full", "lora"])
    parser.add_argument("--serving-only", action="store_true", help="rerun the serving rows")
    args = parser.parse_args()
    if args.child:
        spec = make_spec(
            args.model, adapter=args.child == "lora", steps=args.steps, batch=args.batch
        )
        print(json.dumps(train_row(spec)))
        return
    name = "lora.json" if args.model.startswith("bundled:") else "lora-tiny.json"
    out: dict[str, Any] = {"model": args.model, "batch": args.batch, "machine": platform.node()}
    if args.serving_only and (RESULTS / name).is_file():
        out = json.loads((RESULTS / name).read_text())
    for kind in () if args.serving_only else ("full", "lora"):
        cmd = [sys.executable, __file__, "--child", kind, "--model", args.model,
               "--steps", str(args.steps), "--batch", str(args.batch)]  # fmt: skip
        line = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        out[f"train_{kind}"] = json.loads(line.strip().splitlines()[-1])
        print(kind, out[f"train_{kind}"], flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.serving_only:
            out["bytes"] = bytes_rows(args.model, Path(tmp))
            print("bytes", out["bytes"], flush=True)
        out["serving"] = serving_rows(args.model, Path(tmp), args.requests)
        print("serving", out["serving"], flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / name).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
