"""What a numeric loss costs on top of cross entropy, at Qwen2.5's vocabulary size.

    .venv/bin/python -m bench.loss_speed [--positions 4096] [--reps 3] [--rows ROW ...]

Logits [1, positions, 151,936] float32 (B×T = 4×1024 by default), labels with 10 % or
100 % numeric targets (Qwen2.5's ten digit tokens, from the real tokenizer). For every
configuration, forward+backward seconds (median of `reps` after one warm-up) and the
peak extra memory of that first pass (ru_maxrss minus the resident size once the inputs
exist), each configuration in a fresh process. Rows:
    torch_ce         F.cross_entropy (the bar to beat)
    ours_ce          numtune's fused CE alone
    ours_<loss>      numtune CE + that numeric loss, one fused autograd node
    plain_emd        F.cross_entropy + EMD on `logits[..., ids]` under plain autograd
    ntloss_was/mse   F.cross_entropy + the `ntloss` package's NTL-WAS / NTL-MSE
    ntloss_number    F.cross_entropy + its NumberLevelLoss (reweigh off, as ours_ntl_number)
Writes bench/results/loss_speed.json and loss_speed.png (`--out` elsewhere; `--rows` runs a
subset, which must include torch_ce and ours_ce, the bars the ratios are taken against).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from jobs.losses import NumericVocab, build_loss
from jobs.modeling.tokenizers import load_tokenizer
from jobs.spec import LossSpec

V = 151_936
RESULTS = Path(__file__).resolve().parent / "results"
OURS = ["ce", "emd", "ntl_mse", "mmd", "smmd", "ntil", "del", "dist2", "ntl_number"]
PEERS = ["ntloss_was", "ntloss_mse", "ntloss_number"]
ROWS = ["torch_ce", *(f"ours_{n}" for n in OURS), "plain_emd", *PEERS]


def inputs(positions: int, fraction: float, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(1, positions, V, generator=gen)
    labels = torch.randint(0, V, (1, positions), generator=gen)
    numeric = torch.rand(1, positions, generator=gen) < fraction
    digits = ids[torch.randint(0, len(ids), (1, positions), generator=gen)]
    return logits, torch.where(numeric, digits, labels)


def make_step(row: str, ids: torch.Tensor, vocab: NumericVocab) -> Any:
    """A function (logits, labels) -> scalar loss for one benchmark row."""
    if row == "torch_ce":
        return lambda x, y: F.cross_entropy(x.view(-1, V), y.view(-1))
    if row.startswith("ours_"):
        loss = build_loss(LossSpec.model_validate({"name": row[5:], "gumbel_noise": 0.0}), vocab)
        return lambda x, y: loss(x, y).total
    if row == "plain_emd":
        values = torch.tensor(vocab.values)
        lookup = torch.full((V,), -1, dtype=torch.long)
        lookup[ids] = torch.arange(len(ids))

        def plain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            ce = F.cross_entropy(x.view(-1, V), y.view(-1))
            slot = lookup[y.clamp(min=0)]
            p = torch.softmax(x[..., ids], -1)  # plain gather: a second [M, V] gradient
            dist = (values[None, None, :] - values[slot.clamp(min=0)][..., None]).abs()
            emd = (p * dist).sum(-1)
            mask = slot >= 0
            return ce + 0.3 * (emd * mask).sum() / mask.sum().clamp(min=1)

        return plain
    from ntloss import NTLoss, NTLossDotProduct, NumberLevelLoss

    tok: Any = load_tokenizer("qwen2.5")  # ntloss types it as its own tokenizer class
    peer: Any
    if row == "ntloss_number":
        peer = NumberLevelLoss(tok, vocab_size=V, reweigh=False)
    else:
        peer = (NTLoss if row == "ntloss_was" else NTLossDotProduct)(tok, vocab_size=V)
    return lambda x, y: F.cross_entropy(x.view(-1, V), y.view(-1)) + 0.3 * peer(x, y)


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(row: str, positions: int, fraction: float, reps: int) -> dict[str, Any]:
    torch.set_num_threads(os.cpu_count() or 1)
    vocab = NumericVocab.from_tokenizer(load_tokenizer("qwen2.5"))
    ids = vocab.ids_tensor()
    step = make_step(row, ids, vocab)
    logits, labels = inputs(positions, fraction, ids)
    logits.requires_grad_()
    base = rss_mb()
    times, cpu_times = [], []
    for i in range(reps + 1):
        logits.grad = None
        start, cpu_start = time.perf_counter(), time.process_time()
        step(logits, labels).backward()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
        if i == 0:  # the first pass shows the peak; later ones may reuse freed pages
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
    return {
        "row": row,
        "fraction": fraction,
        "seconds": statistics.median(times[1:]),
        # CPU seconds of this process (all its threads): on a machine other jobs share, the
        # work a row does, where wall seconds mostly measure the other jobs.
        "cpu_seconds": statistics.median(cpu_times[1:]),
        "peak_mb": peak,
    }


def run_all(positions: int, reps: int, rows: list[str]) -> list[dict[str, Any]]:
    from rich.progress import track

    jobs = [(r, f) for f in (0.1, 1.0) for r in rows]
    out = []
    for row, fraction in track(jobs, description="loss configurations"):
        cmd = [
            sys.executable,
            __file__,
            "--child",
            row,
            "--positions",
            str(positions),
            "--fraction",
            str(fraction),
            "--reps",
            str(reps),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            out.append({"row": row, "fraction": fraction, "error": done.stderr.strip()[-400:]})
            continue
        out.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return out


def summarise(results: list[dict[str, Any]]) -> None:
    """Ratios to numtune's CE and to F.cross_entropy, per numeric fraction."""
    for fraction in {r["fraction"] for r in results}:
        same = {r["row"]: r for r in results if r["fraction"] == fraction and "seconds" in r}
        for r in same.values():
            r["vs_torch_ce"] = r["seconds"] / same["torch_ce"]["seconds"]
            r["vs_ours_ce"] = r["seconds"] / same["ours_ce"]["seconds"]
            r["cpu_vs_ours_ce"] = r["cpu_seconds"] / same["ours_ce"]["cpu_seconds"]
            r["extra_mem_vs_ours_ce"] = r["peak_mb"] / same["ours_ce"]["peak_mb"] - 1


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4), dpi=120)
    width = 0.4
    for k, fraction in enumerate((0.1, 1.0)):
        rows = [r for r in results if r["fraction"] == fraction and "vs_torch_ce" in r]
        xs = [i + k * width for i in range(len(rows))]
        ax.bar(xs, [r["vs_torch_ce"] for r in rows], width, label=f"{fraction:.0%} numeric")
        ax.set_xticks(
            [i + width / 2 for i in range(len(rows))], [r["row"] for r in rows], rotation=30
        )
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_ylabel("forward+backward time / F.cross_entropy")
    ax.set_title(f"Numeric losses at V = {V:,}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--positions", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--child")
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--out", type=Path, default=RESULTS / "loss_speed.json")
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=ROWS)
    args = parser.parse_args()
    if not {"torch_ce", "ours_ce"} <= set(args.rows):
        parser.error("--rows: include torch_ce and ours_ce (the ratios are taken against them)")
    if args.child:
        print(json.dumps(child(args.child, args.positions, args.fraction, args.reps)))
        return
    results = run_all(args.positions, args.reps, args.rows)
    summarise(results)
    report = {
        "vocab_size": V,
        "positions": args.positions,
        "reps": args.reps,
        "memory_method": "ru_maxrss during the first forward+backward minus RSS once inputs exist",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    plot(results, args.out.with_suffix(".png"))
    from rich.console import Console
    from rich.table import Table

    table = Table("row", "numeric", "seconds", "× F.ce", "× our CE", "CPU × our CE", "peak MB")
    for r in results:
        if "seconds" not in r:
            table.add_row(r["row"], f"{r['fraction']:.0%}", "error", "", "", "", r["error"][-60:])
            continue
        table.add_row(
            r["row"],
            f"{r['fraction']:.0%}",
            f"{r['seconds']:.3f}",
            f"{r['vs_torch_ce']:.2f}",
            f"{r['vs_ours_ce']:.2f}",
            f"{r['cpu_vs_ours_ce']:.2f}",
            f"{r['peak_mb']:.0f}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
