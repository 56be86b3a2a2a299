"""Bad images are refused where they enter: a JSONL row's image at submit (a 422 naming the
field and the file:line, nothing recorded), an image task on a text-only model, and the
image checks every reader shares (jobs/modeling/vision.py)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from jobs.data import load_task
from jobs.data.images import SIDE, png
from jobs.modeling.vision import MAX_IMAGE_BYTES, MAX_IMAGE_SIDE, ImageError, read_image
from jobs.spec import IMAGE_TASKS, DataSpec, JobSpec
from service.app import create_app
from service.settings import Settings
from tests.support.api import ADMIN, auth, token_for
from tests.support.stub_backend import StubBackend

VLM = {"source": "random:vlm-tiny", "use_chat_template": False}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(
        Settings(home=tmp_path, admin_token=ADMIN), backend=StubBackend(), reconcile=False
    )
    with TestClient(app) as c:
        yield c


def write_rows(folder: Path, image: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ok.png").write_bytes(png(Image.new("RGB", (8, 8), "white")))
    rows = [{"prompt": "How many dots?", "answer": "0", "image": "ok.png"}] * 4
    rows.append({"prompt": "How many dots?", "answer": "3", "image": image})
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def oversized(folder: Path) -> str:
    path = folder / "huge.png"
    Image.new("RGB", (MAX_IMAGE_SIDE + 1, 4), "white").save(path)
    return str(path)


@pytest.mark.parametrize(
    ("image", "needle"),
    [
        ("missing.png", "no such image file"),
        ("notes.txt", "not a readable image"),
        ("HUGE", f"at most {MAX_IMAGE_SIDE} a side"),
        ("/etc/hostname", "not a file inside the data roots"),
        ("../outside.png", "not a file inside the data roots"),
    ],
)
def test_a_bad_row_image_is_a_422_naming_file_and_line_and_nothing_is_recorded(
    client: TestClient, tmp_path: Path, image: str, needle: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text("not a picture")
    (tmp_path / "outside.png").write_bytes(png(Image.new("RGB", (8, 8))))
    rows = write_rows(data, oversized(data) if image == "HUGE" else image)
    token = token_for(client, "ann", "submit", "read")
    spec = {
        "name": "img",
        "model": VLM,
        "data": {"task": "jsonl", "path": str(rows), "eval_size": 1},
    }
    r = client.post("/v1/jobs", json=spec, headers=auth(token))
    assert r.status_code == 422, r.text
    body = r.text
    assert "data.path" in body and f"{rows}:5" in body and needle in body, body
    assert client.get("/v1/jobs", headers=auth(token)).json()["items"] == []


def test_good_image_rows_are_accepted_and_read_as_examples(
    client: TestClient, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    rows = write_rows(data, str(data / "ok.png"))
    token = token_for(client, "ann", "submit", "read")
    spec = {
        "name": "img",
        "model": VLM,
        "data": {"task": "jsonl", "path": str(rows), "eval_size": 1},
    }
    assert client.post("/v1/jobs", json=spec, headers=auth(token)).status_code == 202
    task = load_task(DataSpec(task="jsonl", path=str(rows), eval_size=1))
    assert all(Path(str(ex.image)).name == "ok.png" for ex in task.train + task.eval)


def test_an_image_task_on_a_text_model_names_model_source() -> None:
    with pytest.raises(ValueError, match=r"model\.source: task dots asks about images"):
        JobSpec.model_validate(
            {"name": "x", "model": {"source": "random:tiny-char"}, "data": {"task": "dots"}}
        )


def test_image_checks(tmp_path: Path) -> None:
    assert read_image(png(Image.new("RGB", (5, 7)))).size == (5, 7)
    with pytest.raises(ImageError, match="not a readable image"):
        read_image(b"GIF89a but not really")
    with pytest.raises(ImageError, match="larger than"):
        read_image(b"\0" * (MAX_IMAGE_BYTES + 1))
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buffer, format="TIFF")
    with pytest.raises(ImageError, match="format TIFF"):
        read_image(buffer.getvalue())


@pytest.mark.parametrize("task", IMAGE_TASKS)  # every task the spec accepts has a drawer
def test_generated_image_tasks_are_seeded_and_split(task: str) -> None:
    spec = DataSpec(task=task, train_size=50, eval_size=20, eval_split="extrapolate")  # type: ignore[arg-type]
    one, two = load_task(spec), load_task(spec)
    assert one == two and len(one.train) == 50 and len(one.eval) == 20
    assert all(read_image(ex.image).size == (SIDE, SIDE) for ex in one.train[:5])  # type: ignore[arg-type]
    other = load_task(spec.model_copy(update={"seed": 1}))
    assert [ex.image for ex in other.train] != [ex.image for ex in one.train]
    if task == "clock_face":  # extrapolate: the minutes between the 5s
        assert all(int(ex.answer[-2:]) % 5 == 0 for ex in one.train)
        assert all(int(ex.answer[-2:]) % 5 for ex in one.eval)
    else:  # extrapolate: larger numbers than training shows
        assert max(int(ex.answer) for ex in one.train) < min(int(ex.answer) for ex in one.eval)
