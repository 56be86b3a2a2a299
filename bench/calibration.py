"""Are numtune's sampled intervals honest, and does conformal calibration make them so?

    python bench/calibration.py [--losses ce,smmd_tuned] [--n 350] [--samples 16]

For each loss, a `random:tiny-char` model is trained on the `units` task with the demo's
spec (examples/demo-units.yaml: 800 steps; the accuracy study's setting that learns), or
reused from `--work` when an earlier run left its final checkpoint there. Two disjoint
held-out sets of `--n` questions each, neither seen in training nor used to pick a
checkpoint (they follow the job's own eval set in the held-out draw), go through the
serving path (jobs/calibrate.py): the first calibrates (split conformal on the K samples'
quantiles), the second measures coverage and width before and after, and every point
estimate's error. Writes bench/results/calibration.{json,md,png}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))  # accuracy_* helpers, also when loaded by file path

from accuracy_runs import keep_final_checkpoint  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn  # noqa: E402

from jobs.calibrate import observe  # noqa: E402
from jobs.calibration import calibrate, held_out_check  # noqa: E402
from jobs.calibration_record import LEVELS, Observation  # noqa: E402
from jobs.data import load_task  # noqa: E402
from jobs.infer import NumericPredictor  # noqa: E402
from jobs.runner import build_trainer  # noqa: E402
from jobs.spec import JobSpec, load_spec_file  # noqa: E402
from jobs.storage import RunFiles  # noqa: E402

DEMO = BENCH.parent / "examples" / "demo-units.yaml"
FINAL = "final-checkpoint"
# The loss fields per label; smmd_tuned: the demo's (the accuracy study's sweep chose them).
LOSSES: dict[str, dict[str, Any]] = {
    "ce": {"name": "ce"},
    "smmd_tuned": {"name": "smmd", "bandwidth": 1.54, "weight": 1.82},
    "emd": {"name": "emd"},
}
DIAGRAM_LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def make_spec(label: str, steps: int) -> JobSpec:
    raw = load_spec_file(DEMO)
    raw.update(name=f"calib-units-{label.replace('_', '-')}", register_as=None)
    raw["loss"] = LOSSES[label]
    train = dict(raw["train"])  # type: ignore[call-overload]
    # A short smoke run keeps the demo's schedule shape: warm-up, evaluations, checkpoints.
    for key in ("warmup_steps", "eval_every", "checkpoint_every"):
        train[key] = min(int(train[key]), steps // 2 if key == "warmup_steps" else steps)
    raw["train"] = {**train, "steps": steps}
    raw["calibration"] = {"questions": 0}  # this bench calibrates itself, on other splits
    return JobSpec.model_validate(raw)


SAME = ("model", "data", "loss", "train")  # what must match for a checkpoint to be reused


def reused(spec: JobSpec, folder: Path) -> Path:
    """A checkpoint trained elsewhere (the demo's registered versions): refused unless its
    spec.json has the same model, data, loss and training fields as `spec`."""
    theirs = JobSpec.model_validate_json((folder / "spec.json").read_text())
    for part in SAME:
        if getattr(theirs, part) != getattr(spec, part):
            raise SystemExit(f"--reuse {folder}: its {part} spec differs from this bench's")
    return folder


def trained(spec: JobSpec, work: Path, console: Console) -> Path:
    """The final checkpoint of `spec` under `work`, training it first unless it is there."""
    run = work / spec.name
    final = run / FINAL
    kept_spec = run / "trained-spec.json"
    if final.is_dir() and kept_spec.exists() and kept_spec.read_text() == spec.model_dump_json():
        console.print(f"reusing {final}")
        return final
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    files = RunFiles.for_job(spec.name, str(work.parent / "storage"))
    files.write_text("spec.json", spec.model_dump_json(indent=2))
    reports: list[dict[str, Any]] = []
    started = time.perf_counter()
    console.print(f"training {spec.name}: {spec.train.steps} steps")
    try:
        with keep_final_checkpoint(final, reports):
            fit = build_trainer(spec, files, name="train", in_process=True).fit()
    finally:
        if started:
            ray.shutdown()
    if fit.error is not None or not final.is_dir():
        raise RuntimeError(f"training {spec.name} failed: {fit.error}")
    kept_spec.write_text(spec.model_dump_json())
    last = reports[-1] if reports else {}
    console.print(
        f"  trained in {time.perf_counter() - started:.0f} s, "
        f"eval exact match {last.get('eval_exact_match', float('nan')):.3f}"
    )
    return final


def splits(spec: JobSpec, n: int) -> tuple[list[Any], list[Any]]:
    """Two disjoint held-out sets of n questions after the job's own eval set."""
    skip = spec.data.eval_size
    held = load_task(spec.data.model_copy(update={"eval_size": skip + 2 * n})).eval[skip:]
    return held[:n], held[n:]


def measure(label: str, args: argparse.Namespace, console: Console) -> dict[str, Any]:
    spec = make_spec(label, args.steps)
    given = dict(item.split("=", 1) for item in args.reuse)
    folder = reused(spec, Path(given[label])) if label in given else None
    predictor = NumericPredictor.from_checkpoint(folder or trained(spec, args.work, console))
    cal_set, test_set = splits(spec, args.n)
    observed: dict[str, list[Observation]] = {}
    columns = (BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress("{task.description}", *columns, console=console) as bar:
        for name, rows in (("calibration", cal_set), ("test", test_set)):
            task = bar.add_task(f"{label} {name}", total=len(rows))
            observed[name] = observe(
                predictor, rows, samples=args.samples, max_new_tokens=8,
                progress=lambda k, t=task: bar.advance(t, k),
            )  # fmt: skip
    record = calibrate(
        observed["calibration"], samples=args.samples, temperature=1.0, period=None,
        source="held-out split A", levels=DIAGRAM_LEVELS,
    )  # fmt: skip
    test_record = calibrate(
        observed["test"], samples=args.samples, temperature=1.0, period=None, source="B"
    )
    return {
        "loss": label,
        "spec": spec.model_dump(mode="json"),
        "checkpoint": "reused: " + str(folder) if folder else "trained by this bench",
        "n_calibration": len(observed["calibration"]),
        "n_test": len(observed["test"]),
        "calibrated_mass": {str(r.level): r.calibrated_mass for r in record.levels},
        "intervals": held_out_check(observed["test"], record),
        "estimators_test": {k: v.model_dump() for k, v in test_record.estimators.items()},
        "best_on_calibration": record.best,
        "best_on_test": test_record.best,
    }


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Interval calibration (bench/calibration.py)",
        "",
        f"`random:tiny-char` on `units`, {meta['steps']} steps; K = {meta['samples']} samples;"
        f" calibrated on one held-out set, measured on another (n shown).",
        "",
        "| loss | nominal | n | coverage before | width before | coverage after | width after |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        for row in r["intervals"]:
            if row["level"] not in LEVELS:
                continue
            after = "—" if row["coverage_after"] is None else f"{row['coverage_after']:.3f}"
            wafter = "—" if row["width_after"] is None else f"{row['width_after']:.1f}"
            lines.append(
                f"| {r['loss']} | {row['level']:.2f} | {int(row['n'])} | "
                f"{row['coverage_before']:.3f} | {row['width_before']:.1f} | {after} | {wafter} |"
            )
    lines += ["", "Point estimates on the test set:", ""]
    lines += ["| loss | estimator | MAE | median rel. error | exact match | answered |"]
    lines += ["| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        for name, e in r["estimators_test"].items():
            mae = "—" if e["mae"] is None else f"{e['mae']:.2f}"
            rel = "—" if e["median_rel_error"] is None else f"{e['median_rel_error']:.4f}"
            lines.append(
                f"| {r['loss']} | {name} | {mae} | {rel} | "
                f"{e['exact_match']:.3f} | {e['answered']:.3f} |"
            )
    lines += ["", "Best by MAE: " + ", ".join(
        f"{r['loss']}: {r['best_on_calibration']} (calibration set), {r['best_on_test']} (test)"
        for r in results
    )]  # fmt: skip
    return "\n".join(lines) + "\n"


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Reliability diagram: nominal mass vs measured coverage on the test set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls=":", label="ideal")
    for r in results:
        levels = [row["level"] for row in r["intervals"]]
        before = [row["coverage_before"] for row in r["intervals"]]
        after = [row["coverage_after"] for row in r["intervals"]]
        line = ax.plot(levels, before, "o--", label=f"{r['loss']}: sampled interval")[0]
        ax.plot(levels, after, "s-", color=line.get_color(), label=f"{r['loss']}: calibrated")
    ax.set_xlabel("nominal interval mass")
    ax.set_ylabel(f"coverage on held-out test set (n={results[0]['n_test']})")
    ax.set_title("Reliability of numtune's intervals (units task)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--losses", default="ce,smmd_tuned", help="comma-separated loss labels")
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--n", type=int, default=350, help="questions per held-out set")
    parser.add_argument("--samples", type=int, default=16, help="K samples per question")
    parser.add_argument("--work", type=Path, default=Path("/tmp/numtune-bench-calibration/runs"))
    parser.add_argument("--out", type=Path, default=BENCH / "results")
    parser.add_argument("--name", default="calibration", help="file stem of the results")
    parser.add_argument(
        "--reuse", action="append", default=[], metavar="LOSS=FOLDER",
        help="a checkpoint trained with the same spec (e.g. the demo's registered version)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    console = Console()
    results = [measure(label, args, console) for label in args.losses.split(",")]
    meta = {"steps": args.steps, "samples": args.samples, "n": args.n}
    out = {"meta": meta, "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(out, indent=2) + "\n")
    (args.out / f"{args.name}.md").write_text(markdown(results, meta))
    plot(results, args.out / f"{args.name}.png")
    console.print(markdown(results, meta))
    return out


if __name__ == "__main__":
    main()
