"""The PNG beside a GPU check's JSON (bench/gpu_check.py): median step time per loss and
precision at each batch shape, and each loss's bf16 loss curve on its fixed batch.

    python -m bench.gpu_check_plot bench/results/gpu_check-h200.json   # writes the .png beside
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def plot(report: dict[str, Any], out: Path) -> None:
    rows = [r for r in report["rows"] if r.get("timing")]
    shapes = list(dict.fromkeys(s for r in rows for s in r["timing"]))
    labels = [f"{r['loss']}\n{r['mode']}" for r in rows]
    fig, (bars, curves) = plt.subplots(1, 2, figsize=(14, 5))
    width = 0.8 / max(len(shapes), 1)
    for i, shape in enumerate(shapes):
        ms = [r["timing"].get(shape, {}).get("ms_median", float("nan")) for r in rows]
        bars.bar([x + i * width for x in range(len(rows))], ms, width, label=f"batch {shape}")
    bars.set_xticks([x + width * (len(shapes) - 1) / 2 for x in range(len(rows))], labels)
    bars.tick_params(axis="x", labelsize=7)
    bars.set_ylabel("median step time (ms)")
    bars.legend()
    for r in report["rows"]:
        learned = (r.get("learn") or {}).get("losses")
        if learned:
            curves.plot(learned, label=r["loss"])
    curves.set_xlabel("step (one fixed batch)")
    curves.set_ylabel("training loss, bf16 autocast")
    curves.legend(fontsize=7)
    fig.suptitle(
        f"numtune training step on {report['machine']['device']} (random-init SmolLM2-135M)"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("report", type=Path, help="a JSON written by bench/gpu_check.py")
    args = parser.parse_args()
    plot(json.loads(args.report.read_text()), args.report.with_suffix(".png"))


if __name__ == "__main__":
    main()
