"""/v1/files with Ray stubbed: uploads checked row by row and capped, owners isolated,
files in use kept; a refused upload leaves neither a row nor a file."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.support.api import ADMIN, auth, token_for
from tests.support.files import GOOD_ROWS
from tests.support.stub_backend import StubBackend

CAP = 4096
CHAT_ROW = {"messages": [{"role": "system", "content": "Answer with a number."},
                         {"role": "user", "content": "What is 2 + 2?"},
                         {"role": "assistant", "content": "4"}]}  # fmt: skip


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path, admin_token=ADMIN, max_upload_bytes=CAP)
    with TestClient(create_app(settings, backend=StubBackend(), reconcile=False)) as c:
        yield c


def upload(client: TestClient, token: str, text: str, name: str = "rows.jsonl") -> dict:
    """The reply's body, with its HTTP status as `code`."""
    r = client.post("/v1/files", files={"file": (name, text.encode())},
                    data={"purpose": "fine-tune"}, headers=auth(token))  # fmt: skip
    return {"code": r.status_code, **r.json()}


def stored_files(home: Path) -> list[Path]:
    return [p for p in (home / "storage").rglob("*") if p.is_file()]


def test_upload_records_size_sha256_and_rows_of_both_formats(
    client: TestClient, tmp_path: Path
) -> None:
    ann = token_for(client, "ann", "submit")
    text = GOOD_ROWS + json.dumps(CHAT_ROW) + "\n"
    up = upload(client, ann, text)
    assert up["code"] == 201, up
    assert up["bytes"] == len(text) and up["rows"] == 9
    assert up["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    [stored] = stored_files(tmp_path)
    assert stored.read_text() == text and stored.parent.name == "ann"
    assert client.get(f"/v1/files/{up['id']}", headers=auth(ann)).json()["rows"] == 9
    listed = client.get("/v1/files", headers=auth(ann)).json()
    assert [f["id"] for f in listed["data"]] == [up["id"]] and listed["has_more"] is False


def test_another_owners_file_reads_as_missing(client: TestClient) -> None:
    ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
    mine = upload(client, ann, GOOD_ROWS)["id"]
    missing = "file-" + "0" * 24
    for method in ("GET", "DELETE"):
        theirs = client.request(method, f"/v1/files/{mine}", headers=auth(bob))
        absent = client.request(method, f"/v1/files/{missing}", headers=auth(bob))
        assert theirs.status_code == absent.status_code == 404
        assert theirs.json()["detail"] == absent.json()["detail"].replace(missing, mine)
    assert client.get("/v1/files", headers=auth(bob)).json()["data"] == []
    # Nor can a job of bob's read it.
    spec = {"name": "b", "data": {"task": "jsonl", "file": mine}}
    r = client.post("/v1/jobs", json=spec, headers=auth(bob))
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "data.file"


def test_a_file_in_use_is_kept_until_its_job_ends(client: TestClient, tmp_path: Path) -> None:
    ann = token_for(client, "ann", "submit")
    file_id = upload(client, ann, GOOD_ROWS)["id"]
    spec = {"name": "j", "data": {"task": "jsonl", "file": file_id, "eval_size": 2}}
    job = client.post("/v1/jobs", json=spec, headers=auth(ann)).json()
    # The job reads the stored location the service resolved, not the id.
    assert job["spec"]["data"]["path"] == str(stored_files(tmp_path)[0])
    refused = client.delete(f"/v1/files/{file_id}", headers=auth(ann))
    assert refused.status_code == 409 and job["id"] in refused.json()["detail"]
    assert client.post(f"/v1/jobs/{job['id']}/cancel", headers=auth(ann)).status_code == 202
    gone = client.delete(f"/v1/files/{file_id}", headers=auth(ann))
    assert gone.status_code == 200 and gone.json()["deleted"] is True
    assert stored_files(tmp_path) == []
    assert client.get(f"/v1/files/{file_id}", headers=auth(ann)).status_code == 404


def test_a_path_beside_a_file_id_is_refused(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    file_id = upload(client, ann, GOOD_ROWS)["id"]
    spec = {"name": "j", "data": {"task": "jsonl", "file": file_id, "path": "/etc/passwd"}}
    r = client.post("/v1/jobs", json=spec, headers=auth(ann))
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "data.path"
    # The job as it was stored (its file and the path the service pinned for it) posts again.
    spec["data"]["path"] = None
    stored = client.post("/v1/jobs", json=spec, headers=auth(ann))
    assert stored.status_code == 202, stored.text
    again = client.post("/v1/jobs", json={**stored.json()["spec"], "name": "k"}, headers=auth(ann))
    assert again.status_code == 202, again.text
    assert again.json()["spec"]["data"]["path"] == stored.json()["spec"]["data"]["path"]
    # Another owner's file, named by its pinned path beside an id of one's own, is refused.
    bob = token_for(client, "bob", "submit")
    theirs = upload(client, bob, GOOD_ROWS)["id"]
    spec["data"] = {"task": "jsonl", "file": theirs, "path": stored.json()["spec"]["data"]["path"]}
    r = client.post("/v1/jobs", json=spec, headers=auth(bob))
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "data.path", r.text


BAD_UPLOADS = [
    ("bad row at line 7", GOOD_ROWS.replace('"answer": 7}', '"answer": null}'),
     422, "rows.jsonl:7: 'answer' must be"),
    ("chat without an answer", json.dumps({"messages": CHAT_ROW["messages"][:2]}) + "\n",
     422, "rows.jsonl:1: no assistant message"),
    ("not JSON", "prompt,answer\n", 422, "rows.jsonl:1: not valid JSON"),
    ("empty", "\n\n", 422, "the file has no rows"),
    ("just over the cap", GOOD_ROWS * (CAP // len(GOOD_ROWS) + 1), 413, f"{CAP} bytes"),
    ("far over the cap", GOOD_ROWS * (40 * CAP // len(GOOD_ROWS)), 413, "limited to"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "status", "needle"), [c[1:] for c in BAD_UPLOADS],
                         ids=[c[0] for c in BAD_UPLOADS])  # fmt: skip
def test_a_refused_upload_is_a_clear_4xx_and_leaves_nothing(
    client: TestClient, tmp_path: Path, text: str, status: int, needle: str
) -> None:
    ann = token_for(client, "ann", "submit")
    up = upload(client, ann, text)
    assert up["code"] == status and needle in json.dumps(up["detail"]), up
    assert client.get("/v1/files", headers=auth(ann)).json()["data"] == []
    assert stored_files(tmp_path) == []


def test_uploads_need_a_submit_token_and_the_fine_tune_purpose(client: TestClient) -> None:
    reader = token_for(client, "ann", "read")
    assert upload(client, reader, GOOD_ROWS)["code"] == 403
    ann = token_for(client, "ann", "submit")
    r = client.post("/v1/files", files={"file": ("r.jsonl", GOOD_ROWS.encode())},
                    data={"purpose": "batch"}, headers=auth(ann))  # fmt: skip
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "purpose"
    as_json = client.post("/v1/files", json={"file": GOOD_ROWS}, headers=auth(ADMIN))
    assert as_json.status_code == 415
