"""Images uploaded to /v1/files (purpose vision) and named by file id: the upload checked
as every image is and all-or-nothing; a served request reads only the caller's own image
files (real SQLite, real storage folder, Ray stubbed)."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from jobs.data import load_task
from jobs.data.images import png
from jobs.modeling.vision import MAX_IMAGE_BYTES
from jobs.spec import DataSpec
from service.app import create_app
from service.errors import InvalidRequest
from service.serving.api import PredictRequest
from service.serving.openai_api import ChatRequest
from service.serving.uploaded import UploadedImages
from service.settings import Settings
from service.store import Database, Principal
from tests.support.api import ADMIN, auth, token_for
from tests.support.stub_backend import StubBackend

PNG = png(Image.new("RGB", (16, 16), "red"))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path, admin_token=ADMIN)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings, backend=StubBackend(), reconcile=False)) as c:
        yield c


def upload(client: TestClient, token: str, data: bytes, name: str, purpose: str = "vision") -> Any:
    r = client.post("/v1/files", files={"file": (name, data)}, data={"purpose": purpose},
                    headers=auth(token))  # fmt: skip
    return {"code": r.status_code, **r.json()}


def stored(settings: Settings) -> list[Path]:
    return [p for p in Path(settings.storage_root).rglob("*") if p.is_file()]


def test_an_image_upload_is_stored_beside_the_owners_files_and_listed(
    client: TestClient, settings: Settings
) -> None:
    ann = token_for(client, "ann", "submit")
    jpeg = io.BytesIO()
    Image.new("RGB", (8, 8), "blue").save(jpeg, format="JPEG")
    up = upload(client, ann, PNG, "red.png")
    up_jpeg = upload(client, ann, jpeg.getvalue(), "blue.jpg")
    assert up["code"] == up_jpeg["code"] == 201, (up, up_jpeg)
    assert up["purpose"] == "vision" and up["rows"] == 0 and up["bytes"] == len(PNG)
    names = sorted(p.name for p in stored(settings))
    assert names == sorted([f"{up['id']}.png", f"{up_jpeg['id']}.jpeg"])
    assert all(p.parent.name == "ann" for p in stored(settings))
    listed = client.get("/v1/files", headers=auth(ann)).json()["data"]
    assert {f["id"] for f in listed} == {up["id"], up_jpeg["id"]}
    assert client.get(f"/v1/files/{up['id']}", headers=auth(ann)).json()["purpose"] == "vision"
    # An image is no JSONL file: a job cannot read it as its rows.
    spec = {"name": "j", "data": {"task": "jsonl", "file": up["id"]}}
    refused = client.post("/v1/jobs", json=spec, headers=auth(ann))
    assert refused.status_code == 422 and refused.json()["detail"][0]["field"] == "data.file"
    gone = client.delete(f"/v1/files/{up['id']}", headers=auth(ann))
    assert gone.status_code == 200 and len(stored(settings)) == 1


def test_a_refused_image_leaves_neither_a_row_nor_a_file(
    client: TestClient, settings: Settings
) -> None:
    ann = token_for(client, "ann", "submit")
    wide = png(Image.new("RGB", (2049, 1), "white"))
    oversized = PNG + b"\0" * MAX_IMAGE_BYTES  # a PNG header, but past the image cap
    for data, needle in (
        (b'{"prompt": "1 + 1?", "answer": 2}\n', "not a readable image"),
        (wide, "at most 2048 a side"),
        (oversized, f"larger than {MAX_IMAGE_BYTES} bytes"),
    ):
        up = upload(client, ann, data, "x.png")
        assert up["code"] == 422, up
        [problem] = up["detail"]
        assert problem["field"] == "file" and needle in problem["message"], problem
    # An image is not training rows either.
    assert upload(client, ann, PNG, "x.jsonl", purpose="fine-tune")["code"] == 422
    bad = upload(client, ann, PNG, "x.png", purpose="assistants")
    assert bad["code"] == 422 and bad["detail"][0]["field"] == "purpose"
    assert client.get("/v1/files", headers=auth(ann)).json()["data"] == []
    assert stored(settings) == []


def test_served_requests_read_only_the_callers_own_image_files(
    client: TestClient, settings: Settings
) -> None:
    ann = token_for(client, "ann", "submit")
    image = upload(client, ann, PNG, "red.png")["id"]
    rows = upload(client, ann, b'{"prompt": "1 + 1?", "answer": 2}\n', "r.jsonl", "fine-tune")
    # What the replica builds: the same database and storage root as the control plane.
    images = UploadedImages(Database(settings.database_url), settings.storage_root)
    read_ann = images.reader(Principal("ann", frozenset({"read"}), "t1"))
    read_bob = images.reader(Principal("bob", frozenset({"read"}), "t2"))

    body = PredictRequest(model="m:1", prompts=["a", "b"], images=[image, None])
    assert body.decoded_images(read_ann) == [PNG, None]
    chat = ChatRequest.model_validate({"model": "m:1", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What colour?"},
        {"type": "image_url", "image_url": {"url": image}},
    ]}]})  # fmt: skip
    assert chat.image(read_ann) == PNG

    missing = "file-" + "0" * 24
    answers = []
    for reader, file_id in ((read_bob, image), (read_bob, missing), (read_ann, rows["id"])):
        body = PredictRequest(model="m:1", prompts=["a"], images=[file_id])
        with pytest.raises(InvalidRequest) as caught:
            body.decoded_images(reader)
        [problem] = caught.value.detail  # type: ignore[misc]
        assert problem["field"] == "images[0]"
        answers.append(problem["message"].replace(file_id, "<id>"))
    # Another owner's image reads exactly as a missing one: nothing tells it exists.
    assert answers[0] == answers[1] == answers[2] and "no image file" in answers[0]
    with pytest.raises(InvalidRequest):
        chat.image(read_bob)
    # An inline image still reads as before beside a reader.
    inline = PredictRequest(model="m:1", prompts=["a"], images=[base64.b64encode(PNG).decode()])
    assert inline.decoded_images(read_bob) == [PNG]


def test_jsonl_rows_name_the_callers_uploaded_images_by_id(
    client: TestClient, settings: Settings
) -> None:
    ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
    image = upload(client, ann, PNG, "red.png")["id"]
    row = json.dumps({"prompt": "How many red squares?", "answer": 1, "image": image}) + "\n"
    rows = upload(client, ann, (row * 4).encode(), "rows.jsonl", "fine-tune")["id"]
    spec = {"name": "j", "data": {"task": "jsonl", "file": rows, "eval_size": 2}}
    job = client.post("/v1/jobs", json=spec, headers=auth(ann))
    assert job.status_code == 202, job.text
    # Pinned at submit: the job reads the stored image without the database.
    data = DataSpec.model_validate(job.json()["spec"]["data"])
    [where] = [p for p in stored(settings) if p.suffix == ".png"]
    assert data.images == {image: str(where)}
    examples = load_task(data)
    assert [e.image for e in examples.train + examples.eval] == [str(where)] * 4
    # In use: kept until the job ends.
    assert client.delete(f"/v1/files/{image}", headers=auth(ann)).status_code == 409

    # Bob's rows naming ann's image: refused by file:line as a missing image would be.
    theirs = upload(client, bob, ("\n" + row).encode(), "rows.jsonl", "fine-tune")["id"]
    r = client.post("/v1/jobs", json={**spec, "data": {**spec["data"], "file": theirs}},
                    headers=auth(bob))  # fmt: skip
    assert r.status_code == 422, r.text
    [problem] = r.json()["detail"]
    assert problem["field"] == "data.file"
    assert problem["message"].startswith(f"{theirs}:2: no image file {image!r}")
    # Nor may a spec carry its own pins.
    pinned = {**spec, "data": {**spec["data"], "file": theirs, "images": {image: str(where)}}}
    r = client.post("/v1/jobs", json=pinned, headers=auth(bob))
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "data.images"
    assert client.get("/v1/jobs", headers=auth(bob)).json()["items"] == []  # nothing recorded
