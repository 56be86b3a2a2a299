"""Protocol 2, amendment 12: cell 2's four learning-rate sweeps as the kept work its study
resumes from (bench/study_records.py --kept), one file a sweep.

ce's, emd's and smmd's sweeps ran to their end on the study's first home, which is gone with
its machine; what is left of each is its committed record (its best trial's config and
validation score, and its job id). Each is carried over as the sweep the study builds for
that arm (`StudySpec.lr_sweep_spec`) with that best config; its trials are not (they were
lost). A sweep that ran on a home that still exists (dist2's, run again) is read whole from
its run folder: the spec it ran (request.json), its result and its trials.

    .venv/bin/python bench/p2_carried_sweeps.py --spec bench/studies/p2-penguins.yaml \\
        --snapshot bench/results/protocol2/studies/p2-penguins.json \\
        --records bench/results/protocol2 --run dist2=<home>/storage/runs/<tune id> \\
        --out bench/results/protocol2/kept/p2-penguins
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__" and not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from jobs.records.models import REQUEST, TuneResult
from jobs.records.run_files import RunFiles
from jobs.spec import BASELINE, StudySpec, TuneSpec, load_spec_file

CARRIED = "carried over from its record (protocol 2, amendment 12): its trials were lost"


def from_record(spec: StudySpec, label: str, record: dict[str, Any]) -> dict[str, Any]:
    """A sweep that ended on a home that is gone, from its committed record."""
    arm = spec.arm(label)
    loss = None if label == BASELINE else arm
    sweep = spec.lr_sweep_spec(label, loss)  # type: ignore[arg-type]  # a fixed arm's loss
    trials = int(record["detail"].split(" trials", 1)[0])
    result = TuneResult(status="succeeded", detail=CARRIED, best_config=record["config"],
                        metrics=record["metrics"], trials=trials)  # fmt: skip
    return {"kind": "tune", "arm": label, "job_id": record["job_id"],
            "spec": sweep.model_dump(mode="json"), "result": result.model_dump(mode="json"),
            "trials": []}  # fmt: skip


def from_folder(label: str, folder: Path) -> dict[str, Any]:
    """A sweep whose run folder still exists: the spec it ran, its result, its trials."""
    files = RunFiles.at(str(folder))
    text = files.read_text(REQUEST)
    result = files.read_result(TuneResult)
    if text is None or result is None or result.status != "succeeded":
        raise SystemExit(f"--run {label}={folder}: no succeeded sweep there")
    sweep = TuneSpec.model_validate_json(text)
    return {"kind": "tune", "arm": label, "job_id": folder.name,
            "spec": sweep.model_dump(mode="json"), "result": result.model_dump(mode="json"),
            "trials": [t.model_dump(mode="json") for t in files.read_trials() or []]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--spec", type=Path, required=True)
    p.add_argument("--snapshot", type=Path, required=True, help="the study as last kept")
    p.add_argument("--records", type=Path, required=True)
    p.add_argument("--run", action="append", default=[], help="ARM=FOLDER of a sweep run anew")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    spec = StudySpec.model_validate(load_spec_file(args.spec))
    folders = dict(item.split("=", 1) for item in args.run)
    ended = {r["arm"]: r["job_id"] for r in json.loads(args.snapshot.read_text())["runs"]
             if r["kind"] == "tune" and r["status"] == "succeeded"}  # fmt: skip
    kept = {}
    for path in sorted(args.records.glob("sweep-*.json")):
        record = json.loads(path.read_text())
        kept.update({arm: record for arm, job in ended.items() if job == record["job_id"]})
    args.out.mkdir(parents=True, exist_ok=True)
    for label in [BASELINE, *spec.labels()]:
        if label in folders:
            piece = from_folder(label, Path(folders[label]))
        elif label in kept:
            piece = from_record(spec, label, kept[label])
        else:
            raise SystemExit(f"{label}: neither a record of its ended sweep nor --run {label}=")
        (args.out / f"tune-{label}.json").write_text(json.dumps(piece, indent=1) + "\n")
        print(f"{label}: {piece['job_id']} best config {piece['result']['best_config']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
