"""The sweep's outcome as a table of trials (JSON) and a picture (PNG)."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ray.tune import ResultGrid
from ray.tune.integration.ray_train import CHECKPOINT_PATH_KEY

from jobs.records.models import TrialRow
from jobs.records.run_files import RunFiles
from jobs.spec import MetricMode, TuneSpec

T = TypeVar("T")


def best_row(rows: Iterable[T], value: Callable[[T], Any], mode: MetricMode) -> T | None:
    """The row whose finite `value` is best in `mode` (the metric's direction); None if none."""
    scored = [(v, r) for r in rows if isinstance(v := value(r), int | float) and math.isfinite(v)]
    sign = 1 if mode == "max" else -1
    return max(scored, key=lambda vr: sign * vr[0], default=(None, None))[1]


def trial_rows(grid: ResultGrid, spec: TuneSpec) -> list[TrialRow]:
    """One row per trial: params, best metric (and its checkpoint), last step, status."""
    max_steps = spec.base.train.steps
    rows = []
    for index in range(len(grid)):
        result = grid[index]
        history = (
            result.metrics_dataframe.to_dict("records")
            if result.metrics_dataframe is not None
            else []
        )
        best = best_row(history, lambda r: r.get(spec.metric_key), spec.metric_mode)
        best_ckpt = best_row(
            [r for r in history if isinstance(r.get(CHECKPOINT_PATH_KEY), str)],
            lambda r: r.get(spec.metric_key),
            spec.metric_mode,
        )
        last_step = int(history[-1]["step"]) if history else 0
        if result.error is not None:
            status = "error"
        elif max_steps is not None and last_step < max_steps:
            status = "stopped_early"
        else:
            status = "completed"
        rows.append(
            TrialRow(
                trial_id=(result.metrics or {}).get("trial_id"),
                config={k: (result.config or {})[k] for k in spec.space},
                best_metric=best[spec.metric_key] if best else None,
                best_checkpoint=best_ckpt[CHECKPOINT_PATH_KEY] if best_ckpt else None,
                last_step=last_step,
                status=status,
                error=str(result.error)[:500] if result.error is not None else None,
            )
        )
    return rows


def write_plot(rows: list[TrialRow], spec: TuneSpec, files: RunFiles) -> None:
    """Metric against bandwidth (or the first numeric dimension), coloured by weight."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    numeric = [k for k, d in spec.space.items() if d.kind in ("loguniform", "uniform")]
    x_key = "bandwidth" if "bandwidth" in spec.space else (numeric or list(spec.space))[0]
    c_key = "weight" if "weight" in spec.space and x_key != "weight" else None
    done = [(r, r.best_metric) for r in rows if r.best_metric is not None]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    if done:
        xs = [r.config[x_key] for r, _ in done]
        ys = [y for _, y in done]
        colours = [r.config[c_key] for r, _ in done] if c_key else None
        points = ax.scatter(xs, ys, c=colours, cmap="viridis", s=50, edgecolors="black")
        if c_key:
            fig.colorbar(points, ax=ax, label=c_key)
        for (r, y), x in zip(done, xs, strict=True):
            if r.status == "stopped_early":
                ax.annotate(
                    "stopped", (x, y), fontsize=7, xytext=(4, 4), textcoords="offset points"
                )
        if spec.space[x_key].kind == "loguniform":
            ax.set_xscale("log")
    ax.set_xlabel(x_key)
    ax.set_ylabel(spec.metric_key)
    ax.set_title(f"{spec.name}: {spec.base.loss.name}, {len(rows)} trials")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    with files.fs.open_output_stream(f"{files.root}/trials.png") as out:
        out.write(buf.getvalue())
