"""Ranks that generate the same arithmetic split at once: each rank is its own process
and seeds the global RNG identically (as Ray Train workers do), so any temporary name
drawn from that RNG would collide. No two may share a temporary path, and every rank
must get the same, complete split."""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobs.data import arithmetic
from jobs.storage.paths import build_once

SIZE = 40
RANKS = 2


def _rank(rank: int, home: str, report: str, barrier: Any) -> None:
    """One rank in a fresh (spawned) process; writes what it saw to report/<rank>.json."""
    os.environ["NUMTUNE_HOME"] = home
    temps: list[str] = []

    def recording(target: Path, build: Callable[[Path], None], *, marker: str) -> Path:
        def build_and_record(tmp: Path) -> None:
            temps.append(str(tmp))
            build(tmp)

        return build_once(target, build_and_record, marker=marker)

    arithmetic.build_once = recording  # type: ignore[assignment]
    barrier.wait()  # both ranks start generating together
    rows = arithmetic.arithmetic_examples("add_or_sub", "train", SIZE, seed=7)
    out = {"rows": [r.as_row() for r in rows], "temps": temps}
    Path(report, f"{rank}.json").write_text(json.dumps(out))


@pytest.mark.slow
def test_concurrent_ranks_share_no_temp_path_and_get_one_complete_split(tmp_path: Path) -> None:
    home, report = tmp_path / "home", tmp_path / "report"
    report.mkdir()
    spawn = multiprocessing.get_context("spawn")  # no fork of a process that holds torch
    barrier = spawn.Barrier(RANKS)
    procs = [
        spawn.Process(target=_rank, args=(r, str(home), str(report), barrier)) for r in range(RANKS)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0] * RANKS

    seen = [json.loads((report / f"{r}.json").read_text()) for r in range(RANKS)]
    temps = [t for s in seen for t in s["temps"]]
    assert temps and len(temps) == len(set(temps))  # built at least once, never in one place
    assert all(not Path(t).exists() for t in temps)  # renamed into place or cleaned up
    assert len(seen[0]["rows"]) == SIZE and all(s["rows"] == seen[0]["rows"] for s in seen)
    (cached,) = (home / "cache" / "data" / "arithmetic").glob("add_or_sub-train-*/")
    lines = (cached / arithmetic.ROWS).read_text().splitlines()
    assert [json.loads(line) for line in lines] == seen[0]["rows"]
