"""The loss step from hidden states, with and without materialising the [N, V] logits.

    .venv/bin/python -m bench.fused_linear [--loss smmd] [--reps 1]

Hidden states [N, 896] and an LM head [151,936, 896] (Qwen2.5-0.5B's shapes), fp32, labels
with 10 % number targets (ten digit tokens). One forward + backward of the loss step, i.e.
from hidden states to grads of hidden and weight, per row:
    fused_linear   numtune's chunked linear + CE + numeric loss (`forward_hidden`)
    materialised   logits = h Wᵀ, then numtune's fused CE + numeric loss (today's path)
    torch_ce       logits = h Wᵀ, then F.cross_entropy (plain CE, no numeric term)
Each configuration runs in a fresh process: seconds (median of `reps` passes) and peak
memory (ru_maxrss during the first pass minus the resident size once h and W exist).
A materialised row that would not fit `--max-gib` is measured at the smaller N given and
extrapolated linearly in N (a line through the measured points), marked so.
Liger Kernel and Cut Cross Entropy are not compared: neither is installed here, and both
are Triton/CUDA kernels with no CPU path.
Writes bench/results/fused_linear.json (after every configuration) and fused_linear.png.

    .venv/bin/python -m bench.fused_linear --ab 4096 --rounds 5

Time, fairly: fused_linear and materialised take turns in one process, round after round
(after one warm-up round each), so a change of load falls on both; the median of each and
their ratio go to bench/results/fused_linear_ab.json.
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
from jobs.spec import LossSpec

V, D = 151_936, 896
RESULTS = Path(__file__).resolve().parent / "results"
VOCAB = NumericVocab(list(range(15, 25)), [float(d) for d in range(10)])
# (row, N) in the order that matters most, so an interrupted run still answers the goal.
PLAN = [
    ("fused_linear", 4096),
    ("materialised", 4096),
    ("fused_linear", 16384),
    ("materialised", 2048),
    ("torch_ce", 4096),
    ("torch_ce", 2048),
]


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def make_step(row: str, loss_name: str) -> Any:
    """(hidden [N, d], weight [V, d], labels [N]) → the scalar loss of one benchmark row."""
    loss = build_loss(LossSpec(name=loss_name), VOCAB)
    if row == "fused_linear":
        return lambda h, w, y: loss.forward_hidden(h[None], w, y[None]).total
    if row == "materialised":
        return lambda h, w, y: loss(F.linear(h, w)[None], y[None]).total
    return lambda h, w, y: F.cross_entropy(F.linear(h, w), y)


def inputs(positions: int, vocab: int, width: int) -> tuple[torch.Tensor, ...]:
    """Seeded hidden [N, d] and weight [V, d] (both needing grads), labels [N] with 10 %
    digit targets; torch on every core."""
    torch.set_num_threads(os.cpu_count() or 1)
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(positions, width, generator=gen).requires_grad_()
    weight = (torch.randn(vocab, width, generator=gen) / width**0.5).requires_grad_()
    labels = torch.randint(0, vocab, (positions,), generator=gen)
    numeric = torch.rand(positions, generator=gen) < 0.1
    labels = torch.where(numeric, 15 + torch.randint(0, 10, (positions,), generator=gen), labels)
    return hidden, weight, labels


def child(
    row: str, positions: int, loss_name: str, reps: int, vocab: int = V, width: int = D
) -> dict[str, Any]:
    hidden, weight, labels = inputs(positions, vocab, width)
    step = make_step(row, loss_name)
    base = rss_mb()
    times, peak = [], 0.0
    for i in range(reps):
        hidden.grad = weight.grad = None
        start = time.perf_counter()
        step(hidden, weight, labels).backward()
        times.append(time.perf_counter() - start)
        if i == 0:  # the first pass shows the peak; later ones may reuse freed pages
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
    return {
        "row": row,
        "positions": positions,
        "seconds": statistics.median(times),
        "peak_mb": peak,
    }


def interleaved(positions: int, loss_name: str, rounds: int) -> dict[str, Any]:
    """Both ways in turn on the same tensors; each way's seconds per round."""
    hidden, weight, labels = inputs(positions, V, D)
    steps = {row: make_step(row, loss_name) for row in ("fused_linear", "materialised")}
    seconds: dict[str, list[float]] = {row: [] for row in steps}
    for turn in range(rounds + 1):  # round 0 warms up both
        for row, step in steps.items():
            hidden.grad = weight.grad = None
            start = time.perf_counter()
            step(hidden, weight, labels).backward()
            if turn:
                seconds[row].append(time.perf_counter() - start)
    median = {row: statistics.median(times) for row, times in seconds.items()}
    return {
        "positions": positions, "loss": loss_name, "rounds": rounds, "seconds": seconds,
        "median_s": median, "load_average": os.getloadavg(), "threads": torch.get_num_threads(),
        "time_vs_materialised": median["fused_linear"] / median["materialised"],
    }  # fmt: skip


def fits(row: str, positions: int, max_gib: float) -> bool:
    """Whether a materialised row's [N, V] fp32 tensors (logits + grad, +1 for F.ce) fit."""
    if row == "fused_linear":
        return True
    tensors = 3 if row == "torch_ce" else 2
    return tensors * positions * V * 4 / 2**30 <= max_gib


def extrapolate(results: list[dict[str, Any]], row: str, positions: int) -> dict[str, Any] | None:
    """Peak memory on a line through the row's two largest measured N, at `positions`.

    Memory is the size of tensors proportional to N, so a line is exact enough; time is
    not extrapolated (it depends on caches and load, and a guess is no measurement)."""
    points = sorted(
        (r for r in results if r["row"] == row and "seconds" in r and not r.get("extrapolated")),
        key=lambda r: r["positions"],
    )[-2:]
    if len(points) < 2:
        return None
    (a, b), out = points, {"row": row, "positions": positions, "extrapolated": True}
    slope = (b["peak_mb"] - a["peak_mb"]) / (b["positions"] - a["positions"])
    out["peak_mb"] = b["peak_mb"] + slope * (positions - b["positions"])
    out["seconds"] = None
    return out


def summarise(results: list[dict[str, Any]], target: int) -> dict[str, Any]:
    """At N = target: ours against the materialised path (the issue's must-show ratios)."""
    at = {r["row"]: r for r in results if r["positions"] == target and "seconds" in r}
    if "fused_linear" not in at or "materialised" not in at:
        return {}
    ours, today = at["fused_linear"], at["materialised"]
    return {
        "positions": target,
        "time_vs_materialised": (
            None if today.get("extrapolated") else ours["seconds"] / today["seconds"]
        ),
        "memory_vs_materialised": ours["peak_mb"] / today["peak_mb"],
        "materialised_extrapolated": bool(today.get("extrapolated")),
    }


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=120)
    for row in ("fused_linear", "materialised", "torch_ce"):
        pts = sorted((r for r in results if r["row"] == row), key=lambda r: r["positions"])
        for ax, key in zip(axes, ("seconds", "peak_mb"), strict=True):
            known = [p for p in pts if p[key] is not None]
            ax.plot([p["positions"] for p in known], [p[key] for p in known], marker="o", label=row)
            dashed = [p for p in known if p.get("extrapolated")]
            ax.scatter([p["positions"] for p in dashed], [p[key] for p in dashed], marker="x")
    axes[0].set_ylabel("forward + backward seconds")
    axes[1].set_ylabel("peak extra memory (MB)")
    for ax in axes:
        ax.set_xlabel("positions N (x: extrapolated)")
        ax.legend()
    fig.suptitle(f"Loss step from hidden states, V = {V:,}, d = {D}")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    from rich.progress import track

    report: dict[str, Any] = {
        "vocab_size": V,
        "hidden": D,
        "loss": args.loss,
        "reps": args.reps,
        "memory_method": "ru_maxrss during the first pass minus RSS once h and W exist",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "torch": torch.__version__,
        "results": [],
    }
    results: list[dict[str, Any]] = report["results"]
    for row, n in track(PLAN, description="loss-step configurations"):
        if not fits(row, n, args.max_gib):
            continue
        cmd = [sys.executable, __file__, "--child", row, "--positions", str(n)]
        cmd += ["--loss", args.loss, "--reps", str(args.reps)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            results.append({"row": row, "positions": n, "error": done.stderr.strip()[-400:]})
        else:
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
    for row in ("materialised", "torch_ce"):
        if not any(r["row"] == row and r["positions"] == 16384 for r in results):
            guess = extrapolate(results, row, 16384)
            results.extend([guess] if guess else [])
    report["summary"] = summarise(results, 16384)
    report["summary_4096"] = summarise(results, 4096)
    args.out.write_text(json.dumps(report, indent=2))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--loss", default="smmd")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--max-gib", type=float, default=12.0)
    parser.add_argument("--child")
    parser.add_argument("--positions", type=int, default=4096)
    parser.add_argument("--out", type=Path, default=RESULTS / "fused_linear.json")
    parser.add_argument("--ab", type=int, metavar="N", help="interleaved timing at N positions")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.ab:
        ab = interleaved(args.ab, args.loss, args.rounds)
        (RESULTS / "fused_linear_ab.json").write_text(json.dumps(ab, indent=2))
        print(json.dumps(ab["median_s"]), f"ratio {ab['time_vs_materialised']:.3f}")
        return
    if args.child:
        print(json.dumps(child(args.child, args.positions, args.loss, args.reps)))
        return
    report = run_all(args)
    plot(report["results"], args.out.with_suffix(".png"))
    from rich.console import Console
    from rich.table import Table

    table = Table("row", "N", "seconds", "peak MB", "note")
    for r in report["results"]:
        if "seconds" not in r:
            table.add_row(r["row"], str(r["positions"]), "error", "", r["error"][-60:])
            continue
        note = "extrapolated" if r.get("extrapolated") else "measured"
        table.add_row(
            r["row"], str(r["positions"]), f"{r['seconds']:.1f}", f"{r['peak_mb']:.0f}", note
        )
    Console().print(table)
    Console().print(report["summary"], report["summary_4096"])


if __name__ == "__main__":
    main()
