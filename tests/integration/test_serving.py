"""The serving app on a real Ray Serve (local Ray started here), over HTTP: /v1/predict, the
official `openai` client (completions, chat, streaming, models), bearer tokens, unknown
models, and a tampered artifact refused.

Versions are registered through the real Registry from a tiny digit-writing checkpoint
(tests/support/serving.py's `digit_writer`: every generated token is a digit, so values and
sampled statistics exist).
"""

from __future__ import annotations

import concurrent.futures
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import ray
from ray import serve

from service.serving.api import ServeConfig
from service.serving.deploy import APP_NAME, deploy
from service.settings import Settings
from tests.support import serving

pytestmark = pytest.mark.ray


class Served:
    def __init__(self, url: str, tokens: dict[str, str], home: Path) -> None:
        self.url, self.tokens, self.home = url, tokens, home

    def post(self, path: str, body: dict[str, Any], who: str = "alice") -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.post(f"{self.url}{path}", json=body, headers=headers, timeout=120)

    def openai(self, who: str = "alice") -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=self.tokens[who], max_retries=0)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("home")
    settings = Settings(home=home, dev=True)
    serving.register_checkpoint(settings, name="arith", owner="alice", alias="production")
    serving.register_checkpoint(settings, name="arith", owner="alice", seed=1)  # arith:2
    serving.register_checkpoint(settings, name="calib", owner="alice", seed=2)  # no calibration
    tokens = {
        "alice": serving.new_token(settings, "alice", ["read"]),
        "bob": serving.new_token(settings, "bob", ["submit"]),
        "alice-submit": serving.new_token(settings, "alice", ["read", "submit"]),
    }
    started = not ray.is_initialized()
    if started:
        temp = tempfile.mkdtemp(prefix="nts", dir="/tmp")
        ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp)
    port = serving.free_port()
    deploy(settings, port=port, config=ServeConfig(batch_wait_s=0.05))
    try:
        yield Served(f"http://127.0.0.1:{port}", tokens, home)
    finally:
        serve.delete(APP_NAME)
        serve.shutdown()
        if started:
            ray.shutdown()


def test_predict_fields_and_their_relations(served: Served) -> None:
    body = {"model": "arith@production", "prompts": ["What is 3 + 4?", "12 - 5?"],
            "max_new_tokens": 3, "samples": 12, "interval_mass": 0.8}  # fmt: skip
    reply = served.post("/v1/predict", body)
    assert reply.status_code == 200, reply.text
    out = reply.json()
    assert (out["model"], out["version"], out["ref"]) == ("arith@production", 1, "arith:1")
    assert len(out["predictions"]) == 2
    assert out["samples_used_for"].startswith("12 sampled completions per prompt")
    for p in out["predictions"]:
        assert p["text"].isdigit() and len(p["tokens"]) == 3
        assert p["value"] == float(p["text"]) and p["value_reason"] is None
        assert p["samples"] == 12 and p["parsed_samples"] == 12 and p["interval_mass"] == 0.8
        lo, hi = p["interval"]
        assert 0 <= lo <= hi <= 999 and p["std"] >= 0
        assert lo <= p["expected_value"] <= hi


def test_concurrent_requests_batch_to_the_same_answers(served: Served) -> None:
    """Requests merged into one batch get exactly what each gets alone (greedy text)."""
    prompts = ["What is 1 + 1?", "Compute 317 - 24, please.", "7 + 8?", "9?"]
    alone = [
        served.post("/v1/predict", {"model": "arith:1", "prompts": [p], "samples": 0}).json()
        for p in prompts
    ]
    with httpx.Client(timeout=120) as client:
        headers = {"Authorization": f"Bearer {served.tokens['alice']}"}
        with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
            together = list(pool.map(lambda p: client.post(
                f"{served.url}/v1/predict", headers=headers,
                json={"model": "arith:1", "prompts": [p], "samples": 0},
            ).json(), prompts))  # fmt: skip
    texts = [[p["text"] for p in r["predictions"]] for r in alone]
    assert [[p["text"] for p in r["predictions"]] for r in together] == texts


def test_openai_client_completions_chat_and_streaming(served: Served) -> None:
    client = served.openai()
    done = client.completions.create(
        model="arith@production", prompt="What is 2 + 2?", max_tokens=4, temperature=0
    )
    text = done.choices[0].text
    assert text.isdigit() and len(text) == 4 and done.choices[0].finish_reason == "length"
    assert done.usage is not None and done.usage.completion_tokens == 4
    pieces = client.completions.create(
        model="arith@production", prompt="What is 2 + 2?", max_tokens=4, temperature=0,
        stream=True,
    )  # fmt: skip
    chunks = list(pieces)
    assert "".join(c.choices[0].text for c in chunks) == text
    assert chunks[-1].choices[0].finish_reason == "length"

    chat = client.chat.completions.create(
        model="arith:1", messages=[{"role": "user", "content": "What is 5 + 6?"}],
        max_tokens=3, temperature=0,
    )  # fmt: skip
    answer = chat.choices[0].message.content
    assert answer is not None and answer.isdigit() and chat.choices[0].message.role == "assistant"
    streamed = client.chat.completions.create(
        model="arith:1", messages=[{"role": "user", "content": "What is 5 + 6?"}],
        max_tokens=3, temperature=0, stream=True,
    )  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == answer

    ids = {m.id for m in client.models.list()}
    assert {"arith:1", "arith:2", "arith@production"} <= ids


def test_tokens_owners_and_unknown_models(served: Served) -> None:
    body = {"model": "arith:1", "prompts": ["1?"], "samples": 0}
    reply = httpx.post(f"{served.url}/v1/predict", json=body, timeout=60)
    assert reply.status_code == 401 and reply.json()["error"] == "unauthorized"
    served.tokens["nobody"] = "nt_not-a-real-token"
    reply = served.post("/v1/predict", body, who="nobody")
    assert reply.status_code == 401 and reply.json()["detail"] == "unknown or revoked token"
    with pytest.raises(openai.AuthenticationError):
        served.openai("nobody").completions.create(model="arith:1", prompt="1?", max_tokens=1)

    for who, model in (("alice", "nosuch@production"), ("alice", "arith:9"), ("bob", "arith:1")):
        reply = served.post("/v1/predict", {**body, "model": model}, who=who)
        assert reply.status_code == 404 and reply.json()["error"] == "not_found", reply.text
    # The OpenAI routes answer errors in OpenAI's shape: the client fills code and message.
    with pytest.raises(openai.NotFoundError) as missing:
        served.openai().chat.completions.create(
            model="nosuch", messages=[{"role": "user", "content": "1?"}]
        )
    assert missing.value.code == "not_found" and "nosuch" in missing.value.message
    assert missing.value.type == "not_found_error"
    reply = served.post("/v1/completions", {"model": "arith:1", "prompt": "1", "stop": ["\n"]})
    error = reply.json()["error"]
    assert reply.status_code == 422 and error["param"] == "stop"
    assert error["code"] == "invalid_request"
    assert error["type"] == "invalid_request_error" and error["message"].startswith("stop: ")


def test_a_tampered_artifact_is_refused(served: Served) -> None:
    weights = served.home / "storage" / "registry" / "arith" / "v2" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of one weight
    weights.write_bytes(bytes(data))
    for _ in range(2):  # refused at every load attempt, never cached as loaded
        reply = served.post("/v1/predict", {"model": "arith:2", "prompts": ["1?"], "samples": 0})
        assert reply.status_code == 409, reply.text
        error = reply.json()
        assert error["error"] == "artifact_refused"
        assert "model.safetensors" in error["detail"] and "sha256" in error["detail"]
    with pytest.raises(openai.ConflictError) as refused:
        served.openai().completions.create(model="arith:2", prompt="1?", max_tokens=2)
    assert refused.value.code == "artifact_refused" and "sha256" in refused.value.message


def test_token_then_size_then_parsing(served: Served) -> None:
    """Issue 14 item 6: nothing of an unauthenticated body is read; then 413, then 422."""
    url = f"{served.url}/v1/predict"
    broken = {"content": b'{"model": ', "headers": {"Content-Type": "application/json"}}
    huge = {"model": "arith:1", "prompts": ["1?" * 200_000]}
    assert httpx.post(url, **broken, timeout=60).status_code == 401  # type: ignore[arg-type]
    assert httpx.post(url, json=huge, timeout=60).status_code == 401
    reply = served.post("/v1/predict", huge)
    assert reply.status_code == 413 and reply.json()["error"] == "body_too_large", reply.text
    headers = {**broken["headers"], "Authorization": f"Bearer {served.tokens['alice']}"}
    reply = httpx.post(url, content=broken["content"], headers=headers, timeout=60)
    assert reply.status_code == 422 and "not valid JSON" in reply.text


def test_per_request_budget_prompt_cap_and_seed_range(served: Served) -> None:
    """Issue 14 items 5 and 7, the requests from the issue."""
    big = {"model": "arith:1", "prompts": ["What is 1 + 1?"] * 64, "samples": 256,
           "max_new_tokens": 512}  # fmt: skip
    reply = served.post("/v1/predict", big)
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"][0]["field"] == "budget"
    reply = served.post("/v1/predict", {"model": "arith:1", "prompts": ["9" * 2000], "samples": 0})
    assert reply.status_code == 422 and reply.json()["detail"][0]["field"] == "prompts"
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        served.openai().completions.create(model="arith:1", prompt=["1?"] * 64, max_tokens=512)
    assert refused.value.body["param"] == "budget"  # type: ignore[index]

    seeded = {"model": "arith:1", "prompts": ["1 + 1?"], "samples": 2, "max_new_tokens": 2}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        bad = pool.submit(served.post, "/v1/predict", {**seeded, "seed": 2**64})
        good = pool.submit(served.post, "/v1/predict", {**seeded, "seed": 3})
    assert bad.result().status_code == 422 and "seed" in bad.result().text
    assert good.result().status_code == 200, good.result().text


def test_calibration_absent_then_measured_on_demand_then_served(served: Served) -> None:
    """Issue 16: a version registered without a validation set says calibrated: false;
    /v1/calibrate (submit scope) measures and stores one; /v1/predict then serves it."""
    ask = {"model": "calib:1", "prompts": ["What is 3 + 4?", "12 - 5?"], "max_new_tokens": 3,
           "samples": 8, "interval_mass": 0.8, "seed": 0}  # fmt: skip
    out = served.post("/v1/predict", ask).json()
    assert out["calibration"] == {**out["calibration"], "calibrated": False,
                                  "note": "this version has no calibration"}  # fmt: skip
    assert not any(p["calibrated"] for p in out["predictions"])
    assert [p["estimate"] for p in out["predictions"]] == [p["value"] for p in out["predictions"]]

    examples = [{"prompt": f"What is {a} + {a + 3}?", "answer": str(2 * a + 3)} for a in range(20)]
    job = {"model": "calib:1", "examples": examples, "samples": 8, "max_new_tokens": 3}
    assert served.post("/v1/calibrate", job).status_code == 403  # alice's read-only token
    bad = served.post("/v1/calibrate", {**job, "samples": 1}, who="alice-submit")
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "samples", bad.text
    done = served.post("/v1/calibrate", job, who="alice-submit")
    assert done.status_code == 200, done.text
    record = done.json()["calibration"]
    assert (record["n"], record["samples"], done.json()["ref"]) == (20, 8, "calib:1")
    [level] = [r for r in record["levels"] if r["level"] == 0.8]
    # ⌈21 · 0.8⌉ = 17 ≤ 20 scores; each of 5 folds' 16 others: ⌈17 · 0.8⌉ = 14 ≤ 16.
    assert level["nested_parameter"] is not None and record["method"] == "cross-conformal, 5 folds"
    measured = level["calibrated"]

    out = served.post("/v1/predict", {**ask, "estimate": "auto"}).json()
    info = out["calibration"]
    assert info["calibrated"] and info["n"] == 20 and info["note"] is None
    assert info["nested_parameter"] == level["nested_parameter"]
    assert info["measured_coverage"] == measured["coverage"]  # out of sample
    assert info["measured_coverage_low"] <= info["measured_coverage"]
    assert info["wide"] == measured["wide"] == (measured["relative_width_median"] > 1.0)
    for p in out["predictions"]:
        assert p["calibrated"] and p["interval_mass"] == 0.8
        assert p["estimator"] == record["best"]  # decoding left free, samples given: any
    other_k = served.post("/v1/predict", {**ask, "samples": 4}).json()["calibration"]
    assert not other_k["calibrated"] and "samples=8" in other_k["note"]
    wrong = served.post("/v1/predict", {**ask, "estimate": "mode"})
    assert wrong.status_code == 422 and wrong.json()["detail"][0]["field"] == "estimate"
    clash = served.post("/v1/predict", {**ask, "estimate": "expected", "decoding": "greedy"})
    assert clash.status_code == 422 and clash.json()["detail"].startswith("estimate: ")
