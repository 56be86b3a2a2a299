"""Issue 42 item 1: tables uploaded to /v1/files (purpose table) and named by a table job.
A bad table is a 422 naming the row (and line) and, where there is one, the column, and
nothing is queued: at upload for what the file alone shows, at submit for what the spec
asks of it (its target and template columns, every target value a number)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from httpx import Response

from tests.security.conftest import auth, token_for
from tests.unit.api_cases import GOOD

GOOD_CSV = b"area,rooms,city,price\n52.5,2,Oslo,310.25\n80,3,Bergen,405.5\n61,2,Oslo,1e2\n"


def upload(client: TestClient, token: str, data: bytes, name: str = "t.csv") -> Response:
    files = {"file": (name, data)}
    return client.post("/v1/files", files=files, data={"purpose": "table"}, headers=auth(token))


def submit(client: TestClient, token: str, **data: Any) -> Response:
    spec = GOOD | {"data": {"task": "table", "eval_size": 1, **data}}
    return client.post("/v1/jobs", json=spec, headers=auth(token))


def queued(client: TestClient, token: str) -> list[Any]:
    return list(client.get("/v1/jobs", headers=auth(token)).json()["items"])


def test_a_table_upload_and_job_record_its_rows_decimals_and_units(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    r = upload(client, ann, GOOD_CSV)
    assert r.status_code == 201, r.text
    assert r.json()["purpose"] == "table" and r.json()["rows"] == 3
    r = submit(client, ann, file=r.json()["id"], target="price")
    assert r.status_code == 202, r.text
    data = r.json()["spec"]["data"]
    # Inferred from the rows and written into the spec the job runs: the most decimals.
    assert (data["decimals"], data["units"]) == (2, None)
    assert data["path"].endswith(".csv")


# What the file alone shows is refused at upload, naming row and line (or the header line).
BAD_UPLOADS = {
    "ragged": (b"a,b,y\n1,2,3\n4,5\n", "row 2 (line 3): 2 values for 3 columns"),
    "duplicate column": (b"a,a,y\n1,2,3\n", "duplicate column 'a' (columns 1 and 2)"),
    "missing column name": (b"a,,y\n1,2,3\n", "line 1: column 2 has no name"),
    "latin-1": ("a,city,y\n1,Malmö,3\n".encode("latin-1"), "line 2: not UTF-8 text"),
    "utf-16": ("a,y\n1,2\n".encode("utf-16"), "line 1: not UTF-8 text"),
    "50 MB line": (b"a,y\n" + b"1" * 50_000_000 + b",2\n", "line 2: a row longer than"),
    "jsonl missing column": (
        b'{"a": 1, "y": 2}\n{"y": 3}\n',
        "row 2 (line 2): missing column 'a'",
    ),
    "jsonl nested": (b'{"a": [1], "y": 2}\n', "row 1 (line 1): column 'a': a nested value"),
    "jsonl duplicate key": (b'{"a": 1, "a": 2, "y": 3}\n', "row 1 (line 1): duplicate column"),
    "unclosed quote": (b'a,y\n"1,2\n3,4\n', "row 1 (line 2): not a CSV row"),
}


@pytest.mark.parametrize("case", sorted(BAD_UPLOADS))
def test_a_malformed_table_is_a_422_at_upload_naming_row_and_line(
    client: TestClient, case: str
) -> None:
    ann = token_for(client, "ann", "submit")
    body, expected = BAD_UPLOADS[case]
    r = upload(client, ann, body, "bad.csv")
    assert r.status_code == 422, r.text
    (problem, *_) = r.json()["detail"]
    assert problem["field"] == "file"
    assert problem["message"].startswith("bad.csv: ") and expected in problem["message"]
    assert client.get("/v1/files", headers=auth(ann)).json()["data"] == []


# What the spec asks of the table is refused at submit: the field, and the file, row and
# column in the message; the file is named by its id, never by where it is stored.
BAD_SUBMITS: dict[str, tuple[dict[str, Any], str, str]] = {
    "missing target column": ({"target": "cost"}, "data.target", "no column 'cost'"),
    "non-numeric target": (
        {"target": "city"},
        "data.file",
        "row 1 (line 2): column 'city' (the target): 'Oslo' is not a number",
    ),
    "template column missing": (
        {"target": "price", "template": "{area} m2 in {town}"},
        "data.template",
        "no column 'town'",
    ),
    "too few rows": ({"target": "price", "eval_size": 3}, "data.eval_size", "has 3 rows"),
}


@pytest.mark.parametrize("case", sorted(BAD_SUBMITS))
def test_a_table_job_the_table_cannot_feed_is_a_422_and_queues_nothing(
    client: TestClient, case: str
) -> None:
    ann = token_for(client, "ann", "submit")
    file_id = upload(client, ann, GOOD_CSV).json()["id"]
    fields, field, expected = BAD_SUBMITS[case]
    r = submit(client, ann, file=file_id, **fields)
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem["field"] == field and expected in problem["message"], problem
    assert file_id in problem["message"] and "storage" not in problem["message"]
    assert queued(client, ann) == []


def test_an_empty_target_value_is_a_422_naming_its_row(client: TestClient) -> None:
    ann = token_for(client, "ann", "submit")
    file_id = upload(client, ann, b"a,y\n1,2\n2,NA\n3,4\n").json()["id"]
    r = submit(client, ann, file=file_id, target="y")
    assert r.status_code == 422, r.text
    assert "row 2 (line 3): column 'y' (the target) is empty" in r.json()["detail"][0]["message"]
    assert queued(client, ann) == []


def test_a_fine_tune_file_or_another_owners_table_is_no_table(client: TestClient) -> None:
    ann, bob = token_for(client, "ann", "submit"), token_for(client, "bob", "submit")
    rows = json.dumps({"prompt": "2+2?", "answer": 4}) + "\n"
    files = {"file": ("rows.jsonl", rows.encode())}
    jsonl = client.post("/v1/files", files=files, data={"purpose": "fine-tune"}, headers=auth(ann))
    bobs = upload(client, bob, GOOD_CSV).json()["id"]
    for file_id in (jsonl.json()["id"], bobs):
        r = submit(client, ann, file=file_id, target="price")
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0] == {"field": "data.file", "message": f"no file {file_id!r}"}
    assert queued(client, ann) == []
