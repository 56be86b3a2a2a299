"""bench/queue_scale.py's plot: time per pass and rows read against the jobs, and the
simulated day's waits per owner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

GOAL_S = 5.0  # seconds a reconcile pass and an admission plan may take at 10,000 jobs


def plot_day(ax: Any, day: dict[str, Any]) -> None:
    """Per owner: the longest wait of any job (own backlog and quota included) and the
    longest their front job waited for others' jobs (starved past the line)."""
    owners = day["per_owner"]
    xs = range(len(owners))
    colours = ["tab:red" if o["heavy"] else "tab:blue" for o in owners]
    ax.bar(xs, [o["max_wait_s"] / 3600 for o in owners], color=colours, alpha=0.35,
           label="longest wait, any job (red: heavy owners)")  # fmt: skip
    ax.plot(xs, [o["longest_wait_behind_others_s"] / 3600 for o in owners], "k.",
            label="front job's wait for others' jobs")  # fmt: skip
    ax.axhline(day["starved_after_s"] / 3600, color="red", ls=":", label="starved past this")
    ax.set(yscale="log", xlabel="owner", ylabel="hours",
           title=f"a simulated day, {day['cluster_cpus']:g} CPUs, quotas; starved: "
           f"{len(day['starved'])}")  # fmt: skip
    ax.legend(fontsize=7)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    sizes = [r["jobs"] for r in runs]
    day = result.get("day")
    fig, axes = plt.subplots(1, 3 if day else 2, figsize=(16 if day else 11, 4))
    left, right = axes[0], axes[1]
    for n, style in ((0, "o-"), (2, "s--")):
        left.plot(sizes, [r["passes"][n]["seconds"] for r in runs], style,
                  label=f"reconcile pass {n + 1}")  # fmt: skip
    left.plot(sizes, [r["passes"][2]["cpu_seconds"] for r in runs], "s:",
              label="reconcile pass 3, CPU time")  # fmt: skip
    left.plot(sizes, [r["plan_seconds"] for r in runs], "^:", label="admission plan")
    left.axhline(GOAL_S, color="red", ls=":", label=f"goal ≤ {GOAL_S:g} s")
    left.set(xlabel="queued + running jobs", ylabel="seconds (wall unless CPU)",
             title="time per pass")  # fmt: skip
    left.legend()
    right.plot(sizes, [r["passes"][2]["rows_read"] for r in runs], "o-", label="rows read")
    right.plot(sizes, [r["passes"][2]["statements"] for r in runs], "s--", label="statements")
    right.set(xlabel="queued + running jobs", ylabel="per steady pass", title="database reads")
    right.legend()
    if day:
        quotas = result["quotas"]
        left.plot([quotas["jobs"]], [quotas["pass_seconds"]], "D", color="purple",
                  label=f"quotas + priorities + preemption, {quotas['owners']} owners")  # fmt: skip
        left.legend()
        plot_day(axes[2], day)
    fig.suptitle(
        f"numtune queue, Ray stubbed, SQLite, {result['machine']['cores']} cores, "
        f"{result['commit']}, 1-min load {result['load_average_1']:.1f} at start"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
