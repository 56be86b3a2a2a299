"""One check of numtune's training step on a GPU: every loss, bf16, SmolLM2-135M's shape.

    python -m bench.gpu_check --out "$OUT/gpu_check.json"                 # a CUDA machine
    python -m bench.gpu_check --device cpu --layers 2 --sizes 2x16 --steps 2 \
        --timed 1 --warmup 1 --out /tmp/gpu_check.json                    # a smoke test here

Made for a machine with no internet and no project install: it imports torch, transformers,
numpy and numtune's losses (`jobs.losses` and the bf16 master weights `jobs.train.master`,
both torch only: no pydantic, Ray or FastAPI), from this checkout. The model is
SmolLM2-135M's architecture (bench/assets/smollm2-135m/config.json, a copy of the model's
config) with random weights; the tokenizer is SmolLM2's own (tokenizer.json, gzipped,
Apache-2.0 like the model), so the numeric vocabulary is the real one (digits 0-9).

For each loss in the registry (and ce): a fresh model (same seed), AdamW at lr 1e-3, the loss
from hidden states as numtune trains (jobs/losses/head.py):
  1. `--steps` steps on one fixed batch of the first size, bf16 autocast: every loss value
     finite, and the mean of the last 3 below the first (it learns);
  2. step time at each `--sizes` (B x T): `--warmup` steps, then the median of `--timed`
     steps, each bracketed by device synchronisation; peak device memory.
fp32, bf16 weights (float32 master copies, jobs/train/master.py) and bf16 with the logits
materialised (no fused head) are timed too, for ce and smmd. A loss that fails is recorded
with its error, and the next one runs. The whole check stops starting new work after
`--budget-s` seconds. Writes one JSON (--out), prints a table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import statistics
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

ROOT = Path(__file__).resolve().parents[1]

from jobs.losses import BatchCounts, NumericVocab, build_loss, shift_labels  # noqa: E402
from jobs.losses.catalog import LossConfig, loss_names  # noqa: E402
from jobs.losses.head import HeadLoss  # noqa: E402
from jobs.train.master import MasterWeights  # noqa: E402

ASSETS = Path(__file__).resolve().parent / "assets" / "smollm2-135m"
# bf16: autocast, every loss; the others for BASELINE_LOSSES. bf16_logits: autocast with the
# [B, T, V] logits materialised (HeadLoss off), against the chunked loss from hidden states.
MODES = ("fp32", "bf16", "bf16_weights", "bf16_logits")
BASELINE_LOSSES = ("ce", "smmd")
AUTOCAST = ("bf16", "bf16_logits")


def tokenizer() -> PreTrainedTokenizerFast:
    text = gzip.decompress((ASSETS / "tokenizer.json.gz").read_bytes()).decode()
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(text))


def model(config: LlamaConfig, device: torch.device, seed: int) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    with device:  # initialised in place on the device
        net = LlamaForCausalLM(config)
    return net.train()


def fixed_batch(tok: Any, size: int, length: int, seed: int) -> dict[str, torch.Tensor]:
    """[B, T] token ids of additions ("123+4567=4690;" ...), cut to T tokens; labels = ids."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(size):
        ids: list[int] = []
        while len(ids) < length:
            a, b = (int(x) for x in rng.integers(0, 10_000, 2))
            ids += tok.encode(f"{a}+{b}={a + b};", add_special_tokens=False)
        rows.append(ids[:length])
    ids_t = torch.tensor(rows, dtype=torch.long)
    return {"input_ids": ids_t, "attention_mask": torch.ones_like(ids_t), "labels": ids_t.clone()}


class Run:
    """One model in one mode with one loss; `step` = one optimizer step, its loss value."""

    def __init__(self, net: LlamaForCausalLM, loss: str, mode: str, vocab: NumericVocab):
        self.net, self.mode, self.vocab = net, mode, vocab
        if mode == "bf16_weights":
            torch.nn.Module.to(net, torch.bfloat16)
        params = [p for p in net.parameters() if p.requires_grad]
        self.master = MasterWeights(params) if mode == "bf16_weights" else None
        self.opt = torch.optim.AdamW(self.master.params if self.master else params, lr=1e-3)
        cfg = LossConfig.make(loss) if loss == "ce" else LossConfig.make(loss, weight=0.3)
        loss_fn = build_loss(cfg, vocab).to(next(net.parameters()).device)
        self.loss = HeadLoss(loss_fn, net, enabled=mode != "bf16_logits")

    def step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        labels = shift_labels(batch["labels"])
        counts = BatchCounts.of([labels], self.vocab)
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
        device = batch["input_ids"].device
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.mode in AUTOCAST):
            out = self.loss(self.net, inputs, labels, counts)
        out.total.backward()
        if self.master is not None:
            self.master.pull_grads()
        params = self.master.params if self.master else list(self.net.parameters())
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        if self.master is not None:
            self.master.push_weights()
        return out.total.detach()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def learns(run: Run, batch: dict[str, torch.Tensor], steps: int) -> dict[str, Any]:
    values = [float(run.step(batch)) for _ in range(steps)]
    finite = all(np.isfinite(values))
    tail = float(np.mean(values[-3:]))
    return {"losses": values, "finite": finite, "decreased": finite and tail < values[0]}


def timed(run: Run, batch: dict[str, torch.Tensor], warmup: int, count: int) -> dict[str, Any]:
    device = batch["input_ids"].device
    for _ in range(warmup):
        run.step(batch)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    ms = []
    for _ in range(count):
        sync(device)
        start = time.perf_counter()
        value = run.step(batch)
        sync(device)
        ms.append((time.perf_counter() - start) * 1000)
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    return {"ms_median": statistics.median(ms), "ms": ms, "peak_mem_mib": peak,
            "last_loss": float(value)}  # fmt: skip


def check(args: argparse.Namespace, plan: list[tuple[str, str]], env: dict[str, Any]) -> list[Any]:
    device, rows, started = env["device"], [], time.perf_counter()
    for loss, mode in plan:
        row: dict[str, Any] = {"loss": loss, "mode": mode}
        rows.append(row)
        if time.perf_counter() - started > args.budget_s:
            row["error"] = f"skipped: past the {args.budget_s} s budget"
            continue
        try:
            run = Run(model(env["config"], device, args.seed), loss, mode, env["vocab"])
            if mode == "bf16":  # the learning check runs once per loss, in the training mode
                row["learn"] = learns(run, env["batches"][0], args.steps)
            row["timing"] = {}
            for batch in env["batches"]:
                size, length = batch["input_ids"].shape
                row["timing"][f"{size}x{length}"] = timed(run, batch, args.warmup, args.timed)
        except Exception as error:  # noqa: BLE001  (any failure is a finding: recorded, next)
            row["error"] = f"{type(error).__name__}: {error}"[:2000]
            row["traceback"] = traceback.format_exc()[-4000:]
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
        print(table_line(row), flush=True)
    return rows


def table_line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"{row['loss']:<11} {row['mode']:<13} ERROR {row['error'][:150]}"
    cells = [f"{k}: {t['ms_median']:8.1f} ms" + (f" {t['peak_mem_mib']:7.0f} MiB"
             if t["peak_mem_mib"] else "") for k, t in row["timing"].items()]  # fmt: skip
    learn = row.get("learn")
    said = "" if learn is None else (
        f"  loss {learn['losses'][0]:.3f} -> {learn['losses'][-1]:.3f}"
        f" finite={learn['finite']} decreased={learn['decreased']}"
    )  # fmt: skip
    return f"{row['loss']:<11} {row['mode']:<13} " + " | ".join(cells) + said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--sizes", default="8x32,64x128", help="B x T per timing, comma-separated")
    parser.add_argument("--steps", type=int, default=30, help="steps of the learning check")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--timed", type=int, default=10)
    parser.add_argument("--layers", type=int, default=None, help="fewer layers (a smoke test)")
    parser.add_argument("--losses", nargs="+", default=list(loss_names()))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=200.0)
    args = parser.parse_args()
    device = torch.device(args.device)
    config = LlamaConfig(**json.loads((ASSETS / "config.json").read_text()))
    if args.layers:
        config.num_hidden_layers = args.layers
    tok = tokenizer()
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    batches = [
        {k: v.to(device) for k, v in fixed_batch(tok, b, t, args.seed).items()} for b, t in sizes
    ]
    vocab = NumericVocab.from_tokenizer(tok)
    env = {"device": device, "config": config, "vocab": vocab, "batches": batches}
    # ce in all three modes first (the baseline survives a budget cut), then every loss in
    # bf16, then smmd's baselines.
    plan = [("ce", mode) for mode in MODES] if "ce" in args.losses else []
    plan += [(loss, "bf16") for loss in args.losses if loss != "ce"]
    others = [m for m in MODES if m != "bf16"]
    plan += [(loss, m) for loss in BASELINE_LOSSES[1:] if loss in args.losses for m in others]
    report: dict[str, Any] = {
        "about": __doc__.splitlines()[0],
        "args": vars(args) | {"out": str(args.out)},
    }
    report["machine"] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda"
        else platform.processor() or platform.machine(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "cuda": torch.version.cuda, "bf16_supported": (
            torch.cuda.is_bf16_supported(including_emulation=False) if device.type == "cuda"
            else None),
        "layers": config.num_hidden_layers, "vocab": config.vocab_size,
        "number_tokens": len(vocab),
    }  # fmt: skip
    print(json.dumps(report["machine"]))
    started = time.perf_counter()
    report["rows"] = check(args, plan, env)
    report["wall_s"] = time.perf_counter() - started
    failed = [f"{r['loss']}/{r['mode']}" for r in report["rows"] if "error" in r]
    bad = [f"{r['loss']}" for r in report["rows"] if r.get("learn") and not r["learn"]["decreased"]]
    report["summary"] = {"failed": failed, "did_not_learn": bad}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["summary"]), f"wall {report['wall_s']:.0f} s ->", args.out)


if __name__ == "__main__":
    main()
