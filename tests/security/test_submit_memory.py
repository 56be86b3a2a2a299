"""Issue 30 item 8 (M5): six concurrent submits naming a large JSONL file (all refused for
its last row) read it in chunks, a few at a time: the API's memory stays about the size of
a chunk, not six copies of the file and its parsed rows."""

from __future__ import annotations

import json
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fastapi.testclient import TestClient

from service.settings import Settings
from tests.security.conftest import auth, token_for
from tests.unit.api_cases import GOOD

SUBMITS = 6


def test_concurrent_submits_of_a_large_file_stay_small(
    client: TestClient, settings: Settings
) -> None:
    ann = token_for(client, "ann", "submit")
    data = settings.home / "data"
    data.mkdir(exist_ok=True)
    rows = data / "large.jsonl"
    row = json.dumps({"prompt": "What is 123 + 456? Answer with a number.", "answer": 579})
    with rows.open("w") as out:
        for _ in range(80_000):
            out.write(row + "\n")
        out.write('{"prompt": "no answer"}\n')
    size = rows.stat().st_size  # about 5 MB
    spec = GOOD | {"data": {"task": "jsonl", "path": str(rows)}}

    def submit(_: int) -> tuple[int, str]:
        r = client.post("/v1/jobs", json=spec, headers=auth(ann))
        return r.status_code, r.text

    tracemalloc.start()
    try:
        with ThreadPoolExecutor(SUBMITS) as pool:
            answers = list(pool.map(submit, range(SUBMITS)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    for status, text in answers:
        assert status == 422 and f"{rows}:80001" in text, text
    # Held whole, each submit kept the text, its lines and every parsed row (many times the
    # file's size); streamed, a few 64 KB chunks and their lines.
    assert peak < size // 2, (peak, size)


def test_a_file_read_in_chunks_keeps_its_lines_and_numbers(tmp_path: Path) -> None:
    from jobs.data.jsonl import check_jsonl, read_jsonl

    # Lines longer than a chunk, a CRLF line and a blank line: the same rows as a whole read.
    long_prompt = "x" * (3 << 20)
    lines = [
        json.dumps({"prompt": long_prompt, "answer": 1}),
        json.dumps({"prompt": "a", "answer": 2}) + "\r",
        "",
        json.dumps({"prompt": "b", "answer": 3}),
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines))
    examples = read_jsonl(path)
    assert [(len(e.prompt), e.answer) for e in examples] == [(3 << 20, "1"), (1, "2"), (1, "3")]
    assert check_jsonl(path) == 3
