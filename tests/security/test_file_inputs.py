"""Issue 30 items 13 (L4), 14 (L5) and 16 (L7): files that crashed the parser or a worker
are a 422 naming where the problem is, at upload, at submit and at create."""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from tests.security.conftest import auth, token_for
from tests.support.files import ROW, upload
from tests.unit.api_cases import GOOD


def png_with(chunk_type: bytes, payload: bytes) -> bytes:
    """A valid 4x4 PNG with one more chunk before its pixels (where PIL reads it on open)."""
    buf = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buf, "PNG")
    png = buf.getvalue()
    at = png.index(b"IDAT") - 4
    crc = struct.pack(">I", zlib.crc32(chunk_type + payload))
    return png[:at] + struct.pack(">I", len(payload)) + chunk_type + payload + crc + png[at:]


# 8 MB of text or colour profile, compressed to about 8 KB.
HUGE = zlib.compress(b"\0" * 8_000_000)
BOMBS = {
    "zTXt": png_with(b"zTXt", b"comment\0\0" + HUGE),
    "iCCP": png_with(b"iCCP", b"icc\0\0" + HUGE),
}


@pytest.mark.parametrize("chunk", sorted(BOMBS))
def test_a_png_with_a_huge_compressed_chunk_is_a_422(
    client: TestClient, tmp_path: Path, chunk: str
) -> None:
    ann = token_for(client, "ann", "submit")
    r = upload(client, ann, BOMBS[chunk], "vision", "bomb.png")
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["field"] == "file"
    # The same picture named by a row of a data file inside the data roots, at submit.
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "bomb.png").write_bytes(BOMBS[chunk])
    rows = data / "rows.jsonl"
    rows.write_text(json.dumps(ROW | {"image": "bomb.png"}) + "\n")
    spec = GOOD | {"data": {"task": "jsonl", "path": str(rows)}}
    r = client.post("/v1/jobs", json=spec, headers=auth(ann))
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem["field"] == "data.path" and f"{rows}:1" in problem["message"]
    assert client.get("/v1/jobs", headers=auth(ann)).json()["items"] == []


def test_a_deeply_nested_row_is_a_422_naming_file_and_line(
    client: TestClient, tmp_path: Path
) -> None:
    ann = token_for(client, "ann", "submit")
    nested = json.dumps(ROW) + "\n" + "[" * 200_000 + "\n"
    r = upload(client, ann, nested.encode(), "fine-tune", "deep.jsonl")
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem["field"] == "file" and problem["message"].startswith("deep.jsonl:2: nested")
    # At submit, the same file read from the data roots.
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "deep.jsonl").write_text(nested)
    spec = GOOD | {"data": {"task": "jsonl", "path": str(data / "deep.jsonl")}}
    r = client.post("/v1/jobs", json=spec, headers=auth(ann))
    assert r.status_code == 422, r.text
    assert f"{data / 'deep.jsonl'}:2: nested" in r.json()["detail"][0]["message"]


@pytest.mark.parametrize(("rows", "body", "ok"), [
    (8, {}, False),  # 7 rows left after one is held out: fewer than the default batch of 8
    (9, {}, True),
    (8, {"hyperparameters": {"batch_size": 7}}, True),
    (5, {"hyperparameters": {"batch_size": 6}}, False),
])  # fmt: skip
def test_a_training_file_smaller_than_one_batch_is_a_422_at_create(
    client: TestClient, rows: int, body: dict[str, object], ok: bool
) -> None:
    ann = token_for(client, "ann", "submit")
    text = "".join(json.dumps(ROW) + "\n" for _ in range(rows))
    file_id = upload(client, ann, text.encode(), "fine-tune", "rows.jsonl").json()["id"]
    create = {"model": "random:tiny-digit", "training_file": file_id, **body}
    r = client.post("/v1/fine_tuning/jobs", json=create, headers=auth(ann))
    if ok:
        assert r.status_code == 200, r.text
        return
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem["field"] == "training_file" and "fewer than one batch" in problem["message"]
    assert client.get("/v1/jobs", headers=auth(ann)).json()["items"] == []
