"""An accuracy study's kept results (a benchmark's accuracy-<scale>.json) read for the
dashboard: its cells from `summary`, and its runs shaped like job rows so that the Compare
page's own code draws and diffs them. The file is named by a setting (NUMTUNE_STUDY_RESULTS),
never found in a source checkout; nothing here touches the store; the JSON is data (escaped
by the templates like anything else)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.stats.power import ALPHA  # the threshold on Holm-corrected p, as the study's

METRIC = "exact_match"  # what the study page lists and the curves show
_cache: dict[Path, tuple[float, dict[str, Any]]] = {}  # parsed once per file version


class StudyUnreadable(Exception):
    """No study file, or one that is not a study's JSON: the page says which and why."""


@dataclass
class StudyRun:
    """One run (or the mean of a loss's seeds) with the attributes the compare template
    and its helpers read from a JobRow: id, name, spec, status, result["metrics"]."""

    id: str
    name: str
    spec: dict[str, Any]
    result: dict[str, Any]
    curve: list[dict[str, Any]] = field(default_factory=list)  # metrics rows: step, eval_*
    status: str = "study"


@dataclass
class Cell:
    model: str
    task: str
    split: str
    rows: list[dict[str, Any]]  # the summary's rows of this cell, one per loss


def study_files(setting: str | None) -> list[Path]:
    """NUMTUNE_STUDY_RESULTS: a study JSON, or a folder holding accuracy-*.json; unset,
    none (the page says how to name one)."""
    if not setting:
        return []
    where = Path(setting).expanduser()
    if where.is_dir():
        return sorted(where.glob("accuracy-*.json"))
    return [where] if where.is_file() else []


def load(path: Path) -> dict[str, Any]:
    try:
        mtime = path.stat().st_mtime
        if path in _cache and _cache[path][0] == mtime:
            return _cache[path][1]
        found = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise StudyUnreadable(f"{path.name}: cannot be read as JSON ({error})") from error
    if not (
        isinstance(found, dict)
        and isinstance(found.get("runs"), list)
        and isinstance(found.get("summary"), list)
    ):
        raise StudyUnreadable(f"{path.name}: not a study's results (no 'runs' and 'summary')")
    _cache[path] = (mtime, found)
    return found


def cells(study: dict[str, Any]) -> list[Cell]:
    """The summary's rows grouped by (model, task, split), in the study's own order."""
    grouped: dict[tuple[str, str, str], Cell] = {}
    for row in study["summary"]:
        if not isinstance(row, dict):
            raise StudyUnreadable("a summary row is not an object")
        key = (str(row.get("model")), str(row.get("task")), str(row.get("split")))
        grouped.setdefault(key, Cell(*key, rows=[])).rows.append(row)
    return list(grouped.values())


def survives(row: dict[str, Any]) -> bool | None:
    """Whether the exact-match difference to ce has Holm p < ALPHA (None: not tested)."""
    p = (row.get("vs_ce") or {}).get(METRIC, {}).get("p_holm")
    return None if not isinstance(p, int | float) or math.isnan(p) else p < ALPHA


def cell_runs(study: dict[str, Any], model: str, task: str, split: str) -> list[StudyRun]:
    """The cell's runs, then each loss's mean over its seeds (id "<loss>/mean"): with few
    seeds per loss and many losses, means read better overlaid than every seed."""
    runs = [
        r
        for r in study["runs"]
        if isinstance(r, dict) and (r.get("model"), r.get("task")) == (model, task)
    ]
    shaped = [_shaped(r, split, model, task) for r in runs if split in (r.get("metrics") or {})]
    by_loss: dict[str, list[StudyRun]] = {}
    for run in shaped:
        by_loss.setdefault(run.spec["loss"]["name"], []).append(run)
    # ce first: it is the default baseline, and the study's every comparison is to it.
    order = sorted(by_loss, key=lambda loss: loss != "ce")
    means = [_mean(loss, by_loss[loss], model, task) for loss in order]
    return means + shaped


def _spec(loss: str) -> dict[str, Any]:
    return {"loss": {"name": loss}, "train": {"metric": METRIC}}


def _shaped(run: dict[str, Any], split: str, model: str, task: str) -> StudyRun:
    loss = str(run.get("loss"))
    finals = {f"eval_{k}": v for k, v in (run["metrics"][split] or {}).items()}
    for k in ("final_loss", "final_ce", "step_time_s"):
        finals[k] = run.get(k)
    curve = [
        {"step": p["step"], **{f"eval_{k}": v for k, v in p.items() if k != "step"}}
        for p in run.get("curve") or []
        if isinstance(p, dict) and isinstance(p.get("step"), int | float)
    ]
    return StudyRun(
        id=f"{loss}/s{run.get('seed')}",
        name=f"{model}·{task}",
        spec=_spec(loss),
        result={"metrics": finals},
        curve=curve,
    )


def _mean(loss: str, group: list[StudyRun], model: str, task: str) -> StudyRun:
    finals: dict[str, float] = {}
    for key in {k for r in group for k in r.result["metrics"]}:
        value = _avg([r.result["metrics"].get(key) for r in group])
        if not math.isnan(value):  # a metric no seed reported stays out of the table
            finals[key] = value
    steps: dict[float, list[dict[str, Any]]] = {}
    for r in group:
        for point in r.curve:
            steps.setdefault(point["step"], []).append(point)
    curve = [
        {"step": s, **{k: _avg([p.get(k) for p in ps]) for k in ps[0] if k != "step"}}
        for s, ps in sorted(steps.items())
    ]
    name = f"{model}·{task}, mean of {len(group)} seed{'s' if len(group) > 1 else ''}"
    return StudyRun(id=f"{loss}/mean", name=name, spec=_spec(loss), result={"metrics": finals},
                    curve=curve)  # fmt: skip


def _avg(values: list[Any]) -> float:
    nums = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
    return sum(nums) / len(nums) if nums else math.nan
