"""Are numtune's sampled intervals honest, and does conformal calibration make them so?

    python -m bench.calibration [--losses ce,smmd_tuned] [--n 700] [--samples 16]

For each loss, a `random:tiny-char` model is trained on the `units` task with the demo's
spec (examples/demo-units.yaml: 800 steps; the accuracy study's setting that learns), or
reused from `--work` when an earlier run left its final checkpoint there. `--n` held-out
questions, neither seen in training nor used to pick a checkpoint (they follow the job's
own eval set in the held-out draw), go through the serving path and are calibrated by the
very function a version's record comes from (jobs/calibrate.calibrate_predictor): split
conformal on the K samples' nested intervals, coverage, widths and Winkler scores measured
out of sample by cross-conformal folds, every point estimate's error. Writes
bench/results/calibration.{json,md,png}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent

import ray.train  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn  # noqa: E402

from jobs.calibration.held_out import calibrate_predictor  # noqa: E402
from jobs.calibration.record import LEVELS, Calibration, IntervalReport  # noqa: E402
from jobs.data import load_task  # noqa: E402
from jobs.infer import NumericPredictor  # noqa: E402
from jobs.records.run_files import RunFiles  # noqa: E402
from jobs.spec import JobSpec, load_spec_file  # noqa: E402
from jobs.train.runner import build_trainer  # noqa: E402

DEMO = BENCH.parent / "examples" / "demo-units.yaml"
FINAL = "final-checkpoint"
# The loss fields per label; smmd_tuned: the demo's (the accuracy study's sweep chose them).
LOSSES: dict[str, dict[str, Any]] = {
    "ce": {"name": "ce"},
    "smmd_tuned": {"name": "smmd", "bandwidth": 1.54, "weight": 1.82},
    "emd": {"name": "emd"},
}
DIAGRAM_LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


@contextlib.contextmanager
def keep_final_checkpoint(target: Path, reports: list[dict[str, Any]]) -> Iterator[None]:
    """While active, every report is appended to `reports` and every checkpoint reported is
    copied to `target` (the last one wins): Ray Train's local mode keeps only the last
    report and deletes the checkpoint's folder once the loop has moved on."""
    original = ray.train.report

    def report(metrics: dict[str, Any], checkpoint: Any = None, **kwargs: Any) -> None:
        reports.append(dict(metrics))
        if checkpoint is not None:
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(checkpoint.path, target)
        original(metrics, checkpoint=checkpoint, **kwargs)

    ray.train.report = report
    try:
        yield
    finally:
        ray.train.report = original


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

    own_ray = not ray.is_initialized()
    if own_ray:
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
        if own_ray:  # a Ray someone else started stays up
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


def held_out(spec: JobSpec, n: int) -> list[Any]:
    """n held-out questions after the job's own eval set."""
    skip = spec.data.eval_size
    return load_task(spec.data.model_copy(update={"eval_size": skip + n})).eval[skip:]


def record_of(
    predictor: NumericPredictor,
    rows: list[Any],
    *,
    samples: int,
    max_new_tokens: int,
    progress: Callable[[int], None] | None = None,
) -> Calibration:
    """A version's record of these questions (the end-of-job hook's function), at the
    diagram's levels: the bench's figures are the record's."""
    return calibrate_predictor(
        predictor, rows, samples=samples, max_new_tokens=max_new_tokens,
        source="bench held-out questions", progress=progress, levels=DIAGRAM_LEVELS,
    )  # fmt: skip


def measure(label: str, args: argparse.Namespace, console: Console) -> dict[str, Any]:
    spec = make_spec(label, args.steps)
    given = dict(item.split("=", 1) for item in args.reuse)
    folder = reused(spec, Path(given[label])) if label in given else None
    predictor = NumericPredictor.from_checkpoint(folder or trained(spec, args.work, console))
    rows = held_out(spec, args.n)
    columns = (BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress("{task.description}", *columns, console=console) as bar:
        task = bar.add_task(f"{label} held-out", total=len(rows))
        record = record_of(
            predictor, rows, samples=args.samples, max_new_tokens=args.max_new_tokens,
            progress=lambda k: bar.advance(task, k),
        )  # fmt: skip
    return {
        "loss": label,
        "spec": spec.model_dump(mode="json"),
        "checkpoint": "reused: " + str(folder) if folder else "trained by this bench",
        "n": record.n,
        "record": record.model_dump(mode="json"),
    }


def _cells(report: dict[str, Any] | None) -> str:
    """coverage [Wilson 95 %] | mean width | median rel. width | Winkler | wide"""
    if report is None:
        return "— | — | — | — | —"
    r = IntervalReport.model_validate(report)
    num = ["—" if v is None else f"{v:.3g}"
           for v in (r.width_mean, r.relative_width_median, r.winkler_mean)]  # fmt: skip
    return (
        f"{r.coverage:.3f} [{r.coverage_low:.2f}, {r.coverage_high:.2f}] | "
        + " | ".join(num) + f" | {'yes' if r.wide else 'no'}"
    )  # fmt: skip


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Interval calibration (bench/calibration.py)",
        "",
        f"`random:tiny-char` on `units`, {meta['steps']} steps; K = {meta['samples']} samples;"
        " each loss's record is what a registered version carries (jobs/calibration/held_out.py):"
        " coverage measured out of sample (cross-conformal), with its Wilson 95 % interval.",
        "",
        "| loss | nominal | n | interval | coverage [95 %] | mean width | median rel. width "
        "| Winkler | wide | in-sample coverage |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        record = r["record"]
        for level in record["levels"]:
            if level["level"] not in LEVELS:
                continue
            head = f"| {r['loss']} | {level['level']:.2f} | {record['n']} |"
            inside = level.get("in_sample_coverage")
            lines.append(f"{head} sampled | {_cells(level['sampled'])} | — |")
            lines.append(
                f"{head} calibrated | {_cells(level['calibrated'])} | "
                + ("—" if inside is None else f"{inside:.3f}") + " |"
            )  # fmt: skip
    lines += ["", "Point estimates on the same questions:", ""]
    lines += ["| loss | estimator | MAE | median rel. error | exact match | answered |"]
    lines += ["| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        for name, e in r["record"]["estimators"].items():
            mae = "—" if e["mae"] is None else f"{e['mae']:.2f}"
            rel = "—" if e["median_rel_error"] is None else f"{e['median_rel_error']:.4f}"
            lines.append(
                f"| {r['loss']} | {name} | {mae} | {rel} | "
                f"{e['exact_match']:.3f} | {e['answered']:.3f} |"
            )
    lines += [
        "",
        "Best by MAE: " + ", ".join(f"{r['loss']}: {r['record']['best']}" for r in results),
    ]
    return "\n".join(lines) + "\n"


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Reliability diagram: nominal mass vs coverage out of sample, Wilson 95 % bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls=":", label="ideal")
    for r in results:
        for kind, style in (("sampled", "o--"), ("calibrated", "s-")):
            rows = [(lv["level"], lv[kind]) for lv in r["record"]["levels"] if lv[kind]]
            if not rows:
                continue
            x = [level for level, _ in rows]
            y = [m["coverage"] for _, m in rows]
            err = [[c - m["coverage_low"] for c, (_, m) in zip(y, rows, strict=True)],
                   [m["coverage_high"] - c for c, (_, m) in zip(y, rows, strict=True)]]  # fmt: skip
            ax.errorbar(x, y, yerr=err, fmt=style, capsize=2, label=f"{r['loss']}: {kind}")
    ax.set_xlabel("nominal interval mass")
    ax.set_ylabel(f"coverage out of sample (n={results[0]['n']})")
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
    parser.add_argument("--n", type=int, default=700, help="held-out questions")
    parser.add_argument("--samples", type=int, default=16, help="K samples per question")
    parser.add_argument("--max-new-tokens", type=int, default=8, help="per completion")
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
