"""Issue 29's study over REST, posted once on the shared stack: the dashboard's browser test
follows it live and tests/e2e/test_study_e2e.py checks its result (one study's six runs
instead of two studies, about two minutes of the suite; two seeds, not three, since
the third ran no code the first two do not)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

from tests.e2e.conftest import Numtune

STUDY_TIMEOUT_S = 1500  # six short runs on 2 shared cores (a 4-step run took 3-4 min at load 50)
SEEDS = [0, 1]
ARMS = ["ce", "smmd", "emd"]


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


@dataclass
class SharedStudy:
    created: dict[str, Any]  # POST /v1/studies' answer for the study that runs
    dropped: httpx.Response  # the answer to cancelling a second study right after posting it
    dropped_jobs: list[dict[str, Any]]  # that second study's jobs, read right after

    @property
    def id(self) -> str:
        return str(self.created["id"])


def post_study(numtune: Numtune) -> SharedStudy:
    """The study (ce, smmd, emd × 2 seeds), then a second one cancelled at once, while the
    first one's runs still hold the queue (so the second's jobs are all queued)."""
    with numtune.http() as http:
        train = upload(http, "units-train.jsonl", rows(0, 48))
        test = upload(http, "units-test.jsonl", rows(100, 6))
        r = http.post("/v1/studies", json=study_spec("units", train, test, SEEDS))
        assert r.status_code == 202, r.text
        other = http.post("/v1/studies", json=study_spec("dropped", train, test, [0, 1])).json()
        cancelled = http.post(f"/v1/studies/{other['id']}/cancel")
        jobs = [http.get(f"/v1/jobs/{run['job_id']}").json() for run in other["runs"]]
    return SharedStudy(r.json(), cancelled, jobs)


def wait_for_study(http: httpx.Client, study_id: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        study: dict[str, Any] = http.get(f"/v1/studies/{study_id}").json()
        if study["status"] in ("succeeded", "failed", "cancelled"):
            return study
        assert time.monotonic() < deadline, f"study not done: {study}"
        time.sleep(1)
