"""`numtune study kept` and `numtune study run --kept`: a study's finished work saved from
one service and taken over by a study posted again (the real app over HTTP, Ray's place
taken by a backend that finishes `finish-*` runs at once)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from jobs.spec import load_spec_file
from tests.support.cli import EXAMPLE, cli, service  # noqa: F401 (fixtures)


def _study(service: Any, study_id: str) -> dict[str, Any]:  # noqa: F811
    token = (service.home / "admin-token").read_text().strip()
    found: dict[str, Any] = httpx.get(
        f"{service.url}/v1/studies/{study_id}", headers={"Authorization": f"Bearer {token}"}
    ).json()
    return found


def test_a_study_saved_with_study_kept_is_taken_over_by_run_kept(
    cli: Any,  # noqa: F811
    service: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    study = {"name": "finish-kept", "base": load_spec_file(EXAMPLE),
             "arms": [{"name": "smmd"}], "seeds": [0, 1]}  # fmt: skip
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    result = cli("study", "run", str(path), "--follow")
    assert result.exit_code == 0, result.output
    first = result.output.split()[1]  # "study <id> …"
    deadline = time.monotonic() + 30
    while _study(service, first)["status"] != "succeeded":
        assert time.monotonic() < deadline, _study(service, first)
        time.sleep(0.2)
    kept = tmp_path / "kept.json"
    result = cli("study", "kept", first, "--out", str(kept))
    assert result.exit_code == 0 and "kept 0 sweeps and 4 runs" in result.output, result.output
    assert len(json.loads(kept.read_text())["runs"]) == 4
    submitted = len(service.backend.names)
    result = cli("study", "run", str(path), "--kept", str(kept))
    assert result.exit_code == 0, result.output
    again = _study(service, result.output.split()[1])
    origin = {r["job_id"] for r in _study(service, first)["runs"]}
    assert {r["kept_from"] for r in again["runs"]} == origin  # every run taken over
    assert len(service.backend.names) == submitted  # none handed to Ray again
    # Not a kept-work file, or no such file: a usage error naming the flag.
    for bad in (tmp_path / "missing.json", path):
        result = cli("study", "run", str(path), "--kept", str(bad))
        assert result.exit_code == 2 and "--kept" in result.output, result.output
    result = cli("study", "kept", first, "--out", str(tmp_path / "no" / "such" / "k.json"))
    assert result.exit_code == 2 and "--out" in result.output, result.output
