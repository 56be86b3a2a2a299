"""Issue 45 item 2 (N2): submit-time file checks take turns by owner, and an uploaded file
whose check passed is not read again. One owner's concurrent submits of a large file leave
another owner's small submit within a bound of its own latency alone, measured here."""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import jobs.data.jsonl as jsonl
from service.files.checks import OwnerTurns
from tests.security.conftest import auth, token_for
from tests.support.files import upload
from tests.unit.api_cases import GOOD

ROW = json.dumps({"prompt": "What is 123456 + 654321? Think it through.", "answer": 777777})


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Counter[str], threading.Event]]:
    """Files read through at submit, by name; the event is set once the big one is."""
    counted: Counter[str] = Counter()
    started = threading.Event()
    real = jsonl.examples

    def examples(path: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        counted[Path(path).name] += 1
        if Path(path).name == "big.jsonl":
            started.set()
        return real(path, *args, **kwargs)

    monkeypatch.setattr(jsonl, "examples", examples)
    yield counted, started


def spec_for(path: Path, name: str) -> dict[str, Any]:
    return GOOD | {"name": name, "data": {"task": "jsonl", "path": str(path)}}


def test_another_owners_submit_is_not_held_behind_one_owners_file_checks(
    client: TestClient, tmp_path: Path, reads: tuple[Counter[str], threading.Event]
) -> None:
    counted, started = reads
    ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
    data = tmp_path / "data"
    data.mkdir()
    big, small = data / "big.jsonl", data / "small.jsonl"
    big.write_text((ROW + "\n") * 50_000)  # 3.7 MB: about 0.5 s to read through alone
    small.write_text((ROW + "\n") * 120)  # 9 KB, as in the issue

    def bobs_submit() -> float:
        begun = time.perf_counter()
        r = client.post("/v1/jobs", json=spec_for(small, "bob"), headers=auth(bob))
        assert r.status_code == 202, r.text
        return time.perf_counter() - begun

    alone = statistics.median(bobs_submit() for _ in range(3))
    begun = time.perf_counter()
    r = client.post("/v1/jobs", json=spec_for(big, "ann"), headers=auth(ann))
    assert r.status_code == 202, r.text
    one_check = time.perf_counter() - begun
    started.clear()
    anns = [
        threading.Thread(
            target=lambda: client.post("/v1/jobs", json=spec_for(big, "a"), headers=auth(ann))
        )
        for _ in range(8)
    ]
    for thread in anns:
        thread.start()
    assert started.wait(10)
    time.sleep(0.1)  # the rest of ann's submits reach the checks' queue
    during = bobs_submit()
    for thread in anns:
        thread.join()
    assert counted["big.jsonl"] == 9  # every check of the big file did run
    # Before: two global slots, both ann's, bob behind them and her queue: 5-6 × one_check
    # here (2.9-3.2 s) with four of hers queued, each queued check adding its share. Now bob
    # waits for no slot; what is left is sharing the process's GIL with the one check of
    # ann's that runs (1.6-1.7 × one_check on an idle machine, 3.2 × once beside a loaded
    # suite), whatever the length of her queue. Her queue is eight long so the old wait is
    # far above the bound, and the bound leaves room for a loaded machine.
    assert during < alone + 4 * one_check, (during, alone, one_check)


def test_an_uploaded_file_is_checked_once_whatever_the_submits(
    client: TestClient, reads: tuple[Counter[str], threading.Event]
) -> None:
    counted, _ = reads
    ann = token_for(client, "ann", "submit")
    text = ((ROW + "\n") * 20).encode()
    first = upload(client, ann, text, "fine-tune", "rows.jsonl").json()["id"]
    again = upload(client, ann, text, "fine-tune", "same.jsonl").json()["id"]  # same bytes
    for file_id in (first, first, again, first):
        spec = GOOD | {"data": {"task": "jsonl", "file": file_id}}
        r = client.post("/v1/jobs", json=spec, headers=auth(ann))
        assert r.status_code == 202, r.text
    assert sum(counted.values()) == 1, counted


def test_turns_are_one_slot_per_owner_and_round_robin() -> None:
    turns = OwnerTurns(slots=2, per_owner=1)
    order: list[str] = []
    gate = threading.Event()

    def hold(owner: str) -> None:
        with turns.turn(owner):
            order.append(owner)
            gate.wait(5)

    first = threading.Thread(target=hold, args=("ann",))
    first.start()
    while turns.holding() != {"ann": 1}:
        time.sleep(0.005)
    queued = [threading.Thread(target=hold, args=(o,)) for o in ("ann", "ann", "bob")]
    for thread in queued:
        thread.start()
        time.sleep(0.02)
    while turns.holding() != {"ann": 1, "bob": 1}:
        time.sleep(0.005)  # bob, who came last, got the free slot: ann holds hers already
    assert turns.waiting() == {"ann": 2}
    gate.set()
    for thread in [first, *queued]:
        thread.join(5)
    assert order == ["ann", "bob", "ann", "ann"]
