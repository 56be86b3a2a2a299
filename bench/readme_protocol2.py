"""README.md's "Protocol 2" section, rendered from the studies bench/protocol-2.md runs.

Each cell is a study the service runs; `bench/study_records.py` keeps its runs in
`bench/results/protocol2/` and, beside them, the study as `GET /v1/studies/{id}` answered
(`studies/<study name>.json`). A cell whose study has not succeeded shows its progress and
nothing else: no difference, no verdict, until every seed of every arm has ended (the
protocol's rule). A finished cell shows the service's own result under a sign-aware
headline (bench/cell_headline.py): each arm's mean and difference from `ce` with its CI and
Holm's p, the verdict sentence, the bootstrap interval, the registered secondaries with
Benjamini–Hochberg's q, the intervals, what the cell could detect and its wall time.
tests/checks/test_readme_protocol2.py compares this with README.md.

Beside the records, `summary.json` holds the same in one file for anyone re-checking them:
every cell's runs (arm, seed, status, job id, the record file kept for it) and, once the
cell has finished, its tests as the service computed them (each arm's primary tests with
Holm's and TOST's adjusted p, its secondaries with Benjamini–Hochberg's, its verdict, the
power statement, the intervals and the reference). The test compares it in full too.

    python bench/readme_protocol2.py            # print the section
    python bench/readme_protocol2.py --write    # replace it in README.md, rewrite summary.json
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

# `python bench/readme_protocol2.py` (protocol 2's command line) puts bench/ first on the
# import path; the checkout is where `bench` is a package (`python -m bench.x` needs none).
if __name__ == "__main__" and not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.cell_headline import headline
from bench.readme_pretrained import SUMMARY
from bench.readme_results import section_of
from bench.table_guide import interval_table, point_table, power_lines
from jobs.stats.paired import benjamini_hochberg
from service.cli.studies import family_lines
from service.studies.kept import origin

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RECORDS = ROOT / "bench" / "results" / "protocol2"
HEADING = "## Protocol 2: settling it (bench/protocol-2.md)"
# The protocol's cells, in its order: (study name, what the cell asks).
# bench/protocol-2.md's registered secondaries per cell. Cell 1's spec did not name them,
# so its study's own family was the service's default seven (amendment 10).
REGISTERED = {
    "p2-jsonl": ("mae", "log_error", "within_5pct", "interval_score_90"),
    "p2-penguins": ("exact_match", "log_error", "within_5pct", "crps"),
}
CELLS = (
    ("p2-jsonl", "Cell 1: word problems (JSONL), `ce` against `smmd`, exact match at ±2 points"),
    ("p2-penguins", "Cell 2: a regression table (penguins' body mass), `ce` against three losses"),
)


def load(name: str, folder: Path = RECORDS) -> dict[str, Any] | None:
    """The cell's study as last kept, or None before it was posted."""
    path = folder / "studies" / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _hours(study: dict[str, Any]) -> str:
    start = datetime.fromisoformat(study["created_at"])
    end = datetime.fromisoformat(study.get("finished_at") or study["kept_at"])
    return f"{(end - start).total_seconds() / 3600:.1f} h"


def progress(study: dict[str, Any]) -> list[str]:
    """A cell still running (or stopped): what has ended, and that nothing is judged yet."""
    runs = study.get("runs") or []
    sweeps = [r for r in runs if r["kind"] != "job"]
    jobs = [r for r in runs if r["kind"] == "job"]
    done = sum(r["status"] == "succeeded" for r in jobs)
    swept = sum(r["status"] == "succeeded" for r in sweeps)
    arms = study.get("arms") or []
    planned = len(arms) * len(study.get("seeds") or [])
    taken = sum(bool(r.get("kept_from")) for r in runs)
    resumed = (
        f", resumed with {taken} finished jobs taken over from earlier services" if taken else ""
    )
    return [
        f"**{study['status'].capitalize()}** (study `{study['id']}`, posted "
        f"{study['created_at'][:16].replace('T', ' ')} UTC{resumed}, {_hours(study)} when "
        "last kept): "
        f"{swept} of {len(arms)} learning-rate sweeps and {done} of {planned} evaluation runs "
        "have finished. No difference and no verdict is shown before every seed of every arm "
        "has ended (the protocol's rule); the runs so far are kept in "
        "`bench/results/protocol2/`.",
    ]


def bootstrap_lines(result: dict[str, Any]) -> list[str]:
    """Each arm's paired bootstrap over questions × seeds, beside (never instead of) the t-test."""
    out = []
    for arm in (result.get("comparison") or {}).get("arms", [])[1:]:
        shown = [
            f"{t['metric']} ⟨{t['ci_boot']['low']:+.3g}, {t['ci_boot']['high']:+.3g}⟩"
            for t in arm.get("primary_tests") or []
            if t.get("ci_boot")
        ]
        if shown:
            out.append(f"- `{arm['arm']}`, bootstrap over questions × seeds: " + "; ".join(shown))
    return out


def registered(arm: dict[str, Any], metrics: tuple[str, ...]) -> list[dict[str, Any]]:
    """The arm's tests of the protocol's registered secondaries, with Benjamini–Hochberg
    recomputed over those alone (`q`): the service's `p_bh` is over the study's own
    secondary family, which is wider where a spec did not name the registered ones."""
    tests = [t for t in arm.get("secondary") or [] if t["metric"] in metrics]
    qs = benjamini_hochberg([t.get("p") for t in tests])
    return [{**t, "q": q} for t, q in zip(tests, qs, strict=True)]


def secondary_lines(result: dict[str, Any], metrics: tuple[str, ...]) -> list[str]:
    """Each arm's registered secondaries in plain words, sign-aware: which it is better and
    which worse at (BH q over the registered ones below the study's alpha)."""
    comparison = result.get("comparison") or {}
    alpha = comparison.get("alpha", 0.05)
    out = []
    for arm in comparison.get("arms", [])[1:]:
        tests = [t for t in registered(arm, metrics) if t["q"] is not None]
        found = [t for t in tests if t["q"] < alpha]
        better = [t["metric"] for t in found if (t["diff"] > 0) == t["higher_is_better"]]
        worse = [t["metric"] for t in found if t["metric"] not in better]
        same = [t["metric"] for t in tests if t not in found]
        qs = "; ".join(f"{t['metric']} {t['diff']:+.3g} (q {t['q']:.2g})" for t in tests)
        sides = (("better", better), ("worse", worse), ("no difference", same))
        said = [f"{what} on {', '.join(names) or 'none'}" for what, names in sides]
        out.append(f"- In plain words, `{arm['arm']}` against `ce` on the protocol's "
                   f"{len(tests)} registered secondaries (BH over them, q < {alpha:g}): "
                   f"{'; '.join(said)}. Each, against `ce`: {qs}.")  # fmt: skip
    return out


def conditions(spec: dict[str, Any]) -> str:
    """What a finished cell's verdicts rest on, from the study's own spec."""
    base, sweep = spec["base"], spec.get("tune_lr")
    train = base["train"]
    tuning = (
        f"each arm its own learning-rate sweep ({sweep['num_samples']} trials)"
        if sweep and sweep.get("per_arm")
        else f"ce's learning-rate sweep ({sweep['num_samples']} trials) for every arm"
        if sweep
        else f"no tuning (lr {train['lr']:g})"
    )
    return (
        f"- The verdicts rest on: `{base['model']['source']}`, {train['steps']} steps of batch "
        f"{train['batch_size']}, {train['precision']}, {tuning}, {len(spec['seeds'])} seeds per "
        f"arm, {base['data'].get('eval_size')} held-out questions per run, decoding "
        f"{spec.get('decoding') or train.get('eval_decoding')}."
    )


def wall_line(study: dict[str, Any], walls: dict[str, float]) -> str:
    """The cell's wall time: its study's span; or, for a study resumed from kept work (it
    started after runs it took over had ended elsewhere), its runs' own times summed."""
    if not any(r.get("kept_from") for r in study["runs"]):
        return f"- Wall time: {_hours(study)} (study `{study['id']}`)."
    jobs = [r for r in study["runs"] if r["kind"] == "job"]
    unkept = [origin(r) for r in jobs if origin(r) not in walls]
    if unkept:
        raise SystemExit(f"no record with a wall time for {', '.join(unkept)}")
    hours = sum(walls[origin(r)] for r in jobs) / 3600
    return (
        f"- Wall time: {hours:.1f} h of evaluation runs, the {len(jobs)} runs' own times summed "
        f"(study `{study['id']}` was resumed from kept work, so its own span is not the "
        "cell's; the sweeps' records keep no times)."
    )


def finished(study: dict[str, Any], metrics: tuple[str, ...], walls: dict[str, float]) -> list[str]:
    """A cell whose study succeeded: the service's result, as the study computed it."""
    result = study.get("result") or {}
    arms = (result.get("comparison") or {}).get("arms", [])
    out = [*headline(result), "", *point_table(result), ""]
    if len(interval_table(result)) > 2:
        out += [*interval_table(result), ""]
    families = [line for arm in arms[1:] for line in family_lines(arm)]
    out += [*bootstrap_lines(result), *families, *secondary_lines(result, metrics)]
    out += [conditions(study["spec"])]
    out += [wall_line(study, walls), ""]
    return out + power_lines(result.get("power"))


def _records(folder: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    """job id -> the name of the record kept for it (an evaluation run's or a sweep's), and
    the record."""
    paths = sorted(p for p in folder.glob("*.json") if p.name != SUMMARY)
    kept = ((p.name, json.loads(p.read_text())) for p in paths)
    return {record["job_id"]: (name, record) for name, record in kept}


def _walls(folder: Path) -> dict[str, float]:
    """job id -> its run's wall time in seconds, from its record."""
    found = _records(folder) if folder.is_dir() else {}
    return {job: float(r["wall_s"]) for job, (_, r) in found.items() if "wall_s" in r}


def tests(result: dict[str, Any], metrics: tuple[str, ...]) -> dict[str, Any]:
    """A finished cell's tests as the service computed them (its comparison, unchanged),
    and each arm's registered secondaries with BH over them alone."""
    comparison = result["comparison"]
    family = ("baseline", "primaries", "alpha", "margins", "family_size", "secondary_family_size")
    arms = [
        {
            **{k: arm.get(k) for k in ("arm", "decoding", "verdict", "primary_tests", "secondary")},
            "registered_secondary": registered(arm, metrics),
        }
        for arm in comparison["arms"][1:]
    ]
    extra = {k: result.get(k) for k in ("power", "intervals", "reference")}
    return {**{k: comparison.get(k) for k in family}, "arms": arms, **extra}


def summary(folder: Path = RECORDS) -> dict[str, Any]:
    """summary.json: every cell's runs and, once it has finished, its tests."""
    files = {job: name for job, (name, _) in (_records(folder) if folder.is_dir() else {}).items()}
    cells: dict[str, Any] = {}
    for name, _ in CELLS:
        study = load(name, folder)
        if study is None:
            cells[name] = None
            continue
        # A run taken over from kept work has its record under the job that trained it.
        keys = ("arm", "seed", "kind", "job_id", "kept_from", "status")
        runs = [{**{k: r.get(k) for k in keys}, "record": files.get(origin(r))}
                for r in study["runs"]]  # fmt: skip
        done = study["status"] == "succeeded"
        cells[name] = {
            **{k: study.get(k) for k in ("id", "status", "created_at", "finished_at", "kept_at")},
            "runs": runs,
            "registered_secondaries": list(REGISTERED[name]),
            "tests": tests(study["result"], REGISTERED[name]) if done else None,
        }
    return {"protocol": "bench/protocol-2.md", "runs": sorted(files.values()), "cells": cells}


def summary_text(folder: Path = RECORDS) -> str:
    return json.dumps(summary(folder), indent=1, ensure_ascii=False) + "\n"


def render(folder: Path = RECORDS) -> str:
    lines = [
        HEADING,
        "",
        "<!-- Generated by bench/readme_protocol2.py from bench/results/protocol2/; a test "
        "compares it with this section. Do not edit by hand. -->",
        "",
    ]
    for name, title in CELLS:
        study = load(name, folder)
        lines += [f"### {title}", ""]
        if study is None:
            lines += ["Not started.", ""]
        elif study["status"] == "succeeded":
            lines += finished(study, REGISTERED[name], _walls(folder))
        else:
            lines += [*progress(study), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--write", action="store_true", help="replace the section in README.md")
    args = parser.parse_args()
    section = render()
    if not args.write:
        print(section, end="")
        return
    readme = README.read_text()
    README.write_text(readme.replace(section_of(readme, HEADING), section))
    (RECORDS / SUMMARY).write_text(summary_text())


if __name__ == "__main__":
    main()
