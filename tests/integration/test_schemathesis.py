"""schemathesis against the live OpenAPI schema: every operation, a bounded number of
generated requests (schema-valid and schema-invalid), an admin token on every request.

The app is served by a real uvicorn on 127.0.0.1 and the schema is the one it serves at
/openapi.json, so what is checked is what a client sees. Ray is stubbed at the backend
boundary (tests/support/stub_backend.py): this test is about the HTTP surface.

Generated ids almost never name a real job, so operations on one job, tune or token
also get a pass against resources created first (their other inputs still generated).

Two verdicts from one campaign: no response is a 5xx (a failing request stops that
operation's search and is reported as curl), and every response conforms to the schema
(status code declared, content type and body as declared). Conformance failures are
collected without stopping the search, so they can never hide a 5xx.

The campaign machinery (schemathesis driven through Hypothesis directly) is in
tests/support/campaign.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from schemathesis import GenerationMode
from schemathesis.core.result import Ok

from service.app import create_app
from service.cli.main import server_options
from service.settings import Settings
from tests.security.http_abuse import MB, big_header, many_fields, send
from tests.support.campaign import Campaign, can_be_invalid, run
from tests.support.live_server import live_server
from tests.support.stub_backend import StubBackend

ADMIN = "adm_schemathesis_Rk7Tq2Wm9Vx4Lp8Nc3Jh6Fd1"
AUTH = {"Authorization": f"Bearer {ADMIN}"}
JOB = {"name": "seed", "model": {"source": "random:tiny-digit"}, "loss": {"name": "smmd"}}
ROWS = "".join(
    json.dumps({"prompt": f"What is {i} + 1?", "answer": i + 1}) + "\n" for i in range(16)
).encode()
TUNE = {
    "name": "seed",
    "base": {**JOB, "train": {"eval_every": 10}},  # ASHA compares trials at evaluations
    "space": {"bandwidth": {"kind": "loguniform", "low": 0.1, "high": 2.0}},
}


def existing_resources(base_url: str) -> dict[str, dict[str, str]]:
    """Create a job, a tune, a token, an uploaded file and a fine-tuning job on it (and a
    job whose lr is past the fine-tuning create's limits, which the list must still show);
    path parameters naming them, by path prefix."""
    with httpx.Client(base_url=base_url, headers=AUTH, timeout=10) as client:
        job = client.post("/v1/jobs", json=JOB)
        tune = client.post("/v1/tunes", json=TUNE)
        token = client.post("/v1/tokens", json={"owner": "someone", "scopes": ["read"]})
        uploaded = client.post(
            "/v1/files", files={"file": ("rows.jsonl", ROWS)}, data={"purpose": "fine-tune"}
        )
        fine_tune = client.post(
            "/v1/fine_tuning/jobs",
            json={"model": "random:tiny-digit", "training_file": uploaded.json().get("id")},
        )
        large_lr = client.post("/v1/jobs", json={**JOB, "train": {"lr": 0.5}})
    made = (job, tune, token, uploaded, fine_tune, large_lr)
    assert [r.status_code for r in made] == [202, 202, 201, 201, 200, 202], [r.text for r in made]
    return {
        "/v1/jobs/": {"job_id": job.json()["id"]},
        "/v1/tunes/": {"job_id": tune.json()["id"]},
        "/v1/tokens/": {"token_id": token.json()["id"]},
        "/v1/files/": {"file_id": uploaded.json()["id"]},
        "/v1/fine_tuning/jobs/": {"job_id": fine_tune.json()["id"]},
    }


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    home: Path = tmp_path_factory.mktemp("schemathesis-home")
    config = Settings(home=home, admin_token=ADMIN, reconcile_interval_s=0.2)
    # Served as `numtune api` serves it: the capped request head and read timeouts.
    with live_server(create_app(config, backend=StubBackend()), **server_options()) as base_url:
        schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", timeout=10, headers=AUTH)
        operations = [r.ok() for r in schema.get_all_operations() if isinstance(r, Ok)]
        out = Campaign(sorted(op.label for op in operations), base_url)
        existing = existing_resources(base_url)
        for operation in operations:
            run(operation, GenerationMode.POSITIVE, base_url, out, headers=AUTH)
            if can_be_invalid(operation.definition.raw):
                run(operation, GenerationMode.NEGATIVE, base_url, out, headers=AUTH)
            for prefix, params in existing.items():
                if operation.path.startswith(prefix):
                    run(operation, GenerationMode.POSITIVE, base_url, out, params, headers=AUTH)
        yield out


def test_every_operation_was_exercised(campaign: Campaign) -> None:
    # The schema is the live one (every route of the control plane is in it), each
    # operation got requests, and the passes on existing resources reached them.
    wanted = {"POST /v1/jobs", "GET /v1/jobs/{job_id}", "POST /v1/tunes", "GET /readyz"}
    assert wanted <= set(campaign.operations), campaign.operations
    assert all(campaign.sent[f"{op} [positive]"] > 0 for op in campaign.operations)
    assert 200 in campaign.statuses["GET /v1/jobs/{job_id} [existing]"], campaign.statuses
    assert 200 in campaign.statuses["GET /v1/tunes/{job_id}/trials [existing]"]
    assert 202 in campaign.statuses["POST /v1/jobs/{job_id}/cancel [existing]"]
    assert 204 in campaign.statuses["DELETE /v1/tokens/{token_id} [existing]"]
    assert 200 in campaign.statuses["GET /v1/files/{file_id} [existing]"]
    assert 200 in campaign.statuses["GET /v1/fine_tuning/jobs/{job_id}/events [existing]"]
    assert 200 in campaign.statuses["GET /v1/fine_tuning/jobs [positive]"]


def test_no_server_errors(campaign: Campaign) -> None:
    assert not campaign.server_errors, "\n\n".join(campaign.server_errors)


def test_responses_conform_to_the_schema(campaign: Campaign) -> None:
    found = sorted(campaign.nonconforming)
    summary = "\n".join(f"{op}: {title} ({status})" for op, title, status in found)
    examples = "\n\n".join(campaign.nonconforming[k] for k in found)
    assert not found, f"{summary}\n\n{examples}"


def test_header_and_size_abuse_is_a_4xx(campaign: Campaign) -> None:
    """Issue 45: a huge or many-fielded head is a 431 (no token needed to be refused), an
    oversized or lying body a 4xx; the service answers normally right after."""
    url = campaign.base_url
    assert send(url, big_header("/healthz", 120 * MB)).status == 431
    assert (
        send(url, big_header("/v1/jobs", 70 * 1024, f"Authorization: Bearer {ADMIN}\r\n")).status
        == 431
    )
    assert send(url, many_fields("/v1/jobs", 500)).status == 431
    body = b"{" + b" " * (20 * MB) + b"}"
    with httpx.Client(base_url=url, headers=AUTH, timeout=30) as client:
        big = client.post("/v1/jobs", content=body, headers={"Content-Type": "application/json"})
        assert 400 <= big.status_code < 500, big.status_code
        head = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        head += "Content-Length: 99999999999\r\n"
        lying = send(url, [f"{head}Authorization: Bearer {ADMIN}\r\n\r\n{{}}".encode()])
        assert lying.status is None or 400 <= lying.status < 500, lying
        assert client.get("/healthz").status_code == 200
