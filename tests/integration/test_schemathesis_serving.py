"""schemathesis against the serving port (Ray Serve's proxy and the NumtuneServing replica)
on a local Ray, and the request-head abuse of issue 45 there: no 5xx.

The serving app publishes no OpenAPI schema (its routes read their bodies after the token),
so the schema here is built from the same request models the routes validate with
(PredictRequest, CompletionRequest, ChatRequest, CalibrateRequest) and the GET routes.
Generated and schema-invalid requests, with a read+submit token, against a deployment
with one registered tiny model; the campaign machinery is tests/support/campaign.py's.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import ray
import schemathesis
from pydantic import BaseModel
from ray import serve
from schemathesis import GenerationMode
from schemathesis.core.result import Ok

from service.serving.api import PredictRequest, ServeConfig
from service.serving.calibration import CalibrateRequest
from service.serving.deploy import APP_NAME, deploy
from service.serving.openai_api import ChatRequest, CompletionRequest
from service.settings import Settings
from tests.security.http_abuse import MB, big_header, during, many_fields, send
from tests.support.campaign import Campaign, can_be_invalid, run
from tests.support.serving import free_port, new_token, register_checkpoint

pytestmark = pytest.mark.ray
BODIES: dict[str, type[BaseModel]] = {
    "/v1/predict": PredictRequest,
    "/v1/completions": CompletionRequest,
    "/v1/chat/completions": ChatRequest,
    "/v1/calibrate": CalibrateRequest,
}


def serving_schema() -> dict[str, Any]:
    """OpenAPI 3.1 for the serving routes, their bodies from the request models."""
    any_answer = {"default": {"description": "any"}}
    schemas: dict[str, Any] = {}
    paths: dict[str, Any] = {
        "/healthz": {"get": {"responses": any_answer}},
        "/v1/models": {"get": {"responses": any_answer}},
        "/v1/models/{ref}": {"get": {"responses": any_answer, "parameters": [
            {"name": "ref", "in": "path", "required": True, "schema": {"type": "string"}}
        ]}},
    }  # fmt: skip
    for path, model in BODIES.items():
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
        ref = {"$ref": f"#/components/schemas/{model.__name__}"}
        body = {"required": True, "content": {"application/json": {"schema": ref}}}
        paths[path] = {"post": {"requestBody": body, "responses": any_answer}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "numtune serving", "version": "0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


@pytest.fixture(scope="module")
def serving() -> Iterator[tuple[str, dict[str, str]]]:
    home = tempfile.mkdtemp(prefix="nts-serving-")
    settings = Settings(home=home, dev=True)
    register_checkpoint(settings, name="arith", owner="alice", alias="production")
    token = new_token(settings, "alice", ["read", "submit"])
    started = not ray.is_initialized()
    if started:
        temp = tempfile.mkdtemp(prefix="nts", dir="/tmp")
        ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp)
    port = free_port()
    deploy(settings, port=port, config=ServeConfig(request_timeout_s=20))
    try:
        yield f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    finally:
        serve.delete(APP_NAME)
        serve.shutdown()
        if started:
            ray.shutdown()


def test_no_server_errors_on_the_serving_port(serving: tuple[str, dict[str, str]]) -> None:
    url, auth = serving
    schema = schemathesis.openapi.from_dict(serving_schema())
    operations = [r.ok() for r in schema.get_all_operations() if isinstance(r, Ok)]
    out = Campaign(sorted(op.label for op in operations), url)
    for operation in operations:
        run(operation, GenerationMode.POSITIVE, url, out, headers=auth)
        if can_be_invalid(operation.definition.raw):
            run(operation, GenerationMode.NEGATIVE, url, out, headers=auth)
    assert len(operations) == 7 and all(out.sent[f"{op} [positive]"] for op in out.operations)
    assert all(out.sent[f"POST {path} [negative]"] for path in BODIES), out.sent
    assert not out.server_errors, "\n\n".join(out.server_errors)


def test_header_and_size_abuse_on_the_serving_port(serving: tuple[str, dict[str, str]]) -> None:
    url, auth = serving

    def models() -> None:
        assert httpx.get(f"{url}/v1/models", headers=auth, timeout=30).status_code == 200

    answer, alone, slowest = during(lambda: send(url, big_header("/v1/models", 120 * MB)), models)
    assert answer.status == 431 and answer.seconds < 5, answer
    assert slowest < alone + 1.0, (alone, slowest)
    assert send(url, many_fields("/v1/models", 500)).status == 431
    big = httpx.post(
        f"{url}/v1/predict", content=b"{" + b" " * (5 * MB) + b"}", timeout=30,
        headers={**auth, "Content-Type": "application/json"},
    )  # fmt: skip
    assert big.status_code == 413, big.text
