"""Issue 29's "Must show", over REST on `numtune up`: a study of random:tiny-char on an
uploaded JSONL (2 arms + ce × 3 seeds, a few steps each) runs as ordinary jobs through the
queue and completes; its result carries per-arm differences, CIs, p and Holm-adjusted p,
the equivalence outcome, the verdicts, every run's provenance and per-question predictions;
another owner cannot see it; cancelling a study cancels its queued jobs."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Numtune

pytestmark = [pytest.mark.ray, pytest.mark.slow]
TIMEOUT_S = 1500  # nine short runs on 2 shared cores (a 4-step run took 3-4 min at load 50)


def rows(start: int, n: int) -> bytes:
    """Unit conversions whose answers are numbers: "3 km in m?" → 3000."""
    out = []
    for i in range(start, start + n):
        k = i % 9 + 1
        out.append({"prompt": f"{k} km in m?", "answer": k * 1000} if i % 2 else
                   {"prompt": f"{k} m in cm?", "answer": k * 100})  # fmt: skip
    return "".join(json.dumps(r) + "\n" for r in out).encode()


def upload(http: httpx.Client, name: str, data: bytes) -> str:
    r = http.post("/v1/files", files={"file": (name, data)}, data={"purpose": "fine-tune"})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def study_spec(name: str, train: str, test: str, seeds: list[int]) -> dict[str, Any]:
    base = {
        "name": "units",
        "model": {"source": "random:tiny-char", "use_chat_template": False},
        "data": {"task": "jsonl", "file": train, "eval_file": test, "eval_size": 6,
                 "max_length": 64},
        "train": {"steps": 4, "batch_size": 8, "lr": 0.003, "eval_every": 2,
                  "eval_max_new_tokens": 6, "keep_top_k": 1},
        "scaling": {"num_workers": 1, "cpus_per_worker": 1},
        "calibration": {"questions": 0},
    }  # fmt: skip
    arms = [{"name": "smmd", "bandwidth": 1.54, "weight": 1.82}, {"name": "emd"}]
    return {"name": name, "base": base, "arms": arms, "seeds": seeds}


def wait_for_study(http: httpx.Client, study_id: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        study: dict[str, Any] = http.get(f"/v1/studies/{study_id}").json()
        if study["status"] in ("succeeded", "failed", "cancelled"):
            return study
        assert time.monotonic() < deadline, f"study not done: {study}"
        time.sleep(1)


def test_a_study_compares_arms_with_paired_statistics(shared_numtune: Numtune) -> None:
    with shared_numtune.http() as http:
        train = upload(http, "units-train.jsonl", rows(0, 48))
        test = upload(http, "units-test.jsonl", rows(100, 6))
        r = http.post("/v1/studies", json=study_spec("units", train, test, [0, 1, 2]))
        assert r.status_code == 202, r.text
        study = r.json()
        assert len(study["runs"]) == 9 and {x["kind"] for x in study["runs"]} == {"job"}

        # A second study, cancelled at once: its queued jobs are cancelled with it.
        other = http.post("/v1/studies", json=study_spec("dropped", train, test, [0, 1])).json()
        cancelled = http.post(f"/v1/studies/{other['id']}/cancel")
        assert cancelled.status_code == 202, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
        for run in cancelled.json()["runs"]:
            job = http.get(f"/v1/jobs/{run['job_id']}").json()
            assert job["status"] == "cancelled", job

        # Another owner sees neither study.
        token = http.post("/v1/tokens", json={"owner": "bob", "scopes": ["submit"]}).json()["token"]
        bob = {"Authorization": f"Bearer {token}"}
        assert http.get(f"/v1/studies/{study['id']}", headers=bob).status_code == 404
        assert http.get("/v1/studies", headers=bob).json()["items"] == []

        done = wait_for_study(http, study["id"], TIMEOUT_S)
        assert done["status"] == "succeeded", done
        failed = [http.get(f"/v1/jobs/{x['job_id']}").json() for x in done["runs"]
                  if x["status"] != "succeeded"]  # fmt: skip
        assert not failed and done["ended"] == 9, [(j["reason"], j["detail"]) for j in failed]
        result = done["result"]
        comparison = result["comparison"]
        assert comparison["baseline"] == "ce" and comparison["primary"] == "exact_match"
        assert [a["arm"] for a in comparison["arms"]] == ["ce", "smmd", "emd"]
        for arm in comparison["arms"][1:]:
            test_ = arm["vs_ce"]
            assert test_["n"] == 3 and test_["seeds"] == [0, 1, 2]
            for key in ("diff", "ci", "p", "p_holm", "equivalent", "wins", "p_boot"):
                assert key in test_, (key, test_)
            assert arm["verdict"].startswith(arm["arm"]) or arm["arm"] in arm["verdict"]
            assert len(arm["runs"]) == 3
        # One chart of every arm's learning curve.
        svg = http.get(done["curves_url"])
        assert svg.headers["content-type"].startswith("image/svg+xml")
        for arm in ("ce", "smmd", "emd"):
            assert f'data-series="{arm}"' in svg.text
        # The CLI shows the same study.
        shown = shared_numtune.cli("study", "show", study["id"])
        assert shown.returncode == 0, shown.stderr
        assert "smmd" in shown.stdout and "p_Holm" in shown.stdout
        # Every run: its spec, provenance and per-question predictions.
        assert len(result["runs"]) == 9
        for run in result["runs"]:
            assert run["status"] == "succeeded" and run["spec"]["train"]["seed"] == run["seed"]
            assert run["provenance"], run
            assert len(run["predictions"]) == 6, run
