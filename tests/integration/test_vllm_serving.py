"""The serving replica with NUMTUNE_SERVE_ENGINE=vllm on a real Ray Serve, over HTTP: the
bundled SmolLM2-135M (a registered version) answers on vLLM with numtune's read-out, the
OpenAI endpoint too, and a LoRA version on it decodes on its base's vLLM worker as peft
does; a tiny test model, which vLLM cannot run, is answered by generate()
on the same replica; /readyz says which. float32 both ways: the answers must be
generate()'s."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
import ray
from ray import serve

from jobs.infer import NumericPredictor
from service.serving.api import ServeConfig
from service.serving.deploy import APP_NAME, deploy
from service.settings import Settings
from tests.support import serving

pytestmark = [pytest.mark.ray, pytest.mark.slow]
QUESTIONS = ["Reply with digits only: 317 * 24 =", "Number only: 45 / 9"]


class Served:
    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.headers = {"Authorization": f"Bearer {token}"}

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body, headers=self.headers, timeout=600)

    def ready(self) -> dict[str, Any]:
        reply = httpx.get(f"{self.url}/readyz", timeout=30)
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        return body


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("home")
    settings = Settings(home=home, dev=True)
    serving.register_checkpoint(settings, name="smol", owner="alice", build=serving.smollm2)
    serving.register_checkpoint(settings, name="digits", owner="alice")
    serving.register_checkpoint(
        settings, name="smol-lora", owner="alice", build=serving.smollm2_lora
    )
    token = serving.new_token(settings, "alice", ["read"])
    started = not ray.is_initialized()
    if started:
        temp = tempfile.mkdtemp(prefix="nts", dir="/tmp")
        ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp)
    port = serving.free_port()
    deploy(settings, port=port, config=ServeConfig(engine="vllm", dtype="fp32"))
    try:
        yield Served(f"http://127.0.0.1:{port}", token)
    finally:
        serve.delete(APP_NAME)
        serve.shutdown()
        if started:
            ray.shutdown()


@pytest.fixture(scope="module")
def hf(tmp_path_factory: pytest.TempPathFactory) -> NumericPredictor:
    """The same version's files on generate() alone, in this process."""
    folder = serving.smollm2(tmp_path_factory.mktemp("smol") / "checkpoint")
    return NumericPredictor.from_checkpoint(folder)


def test_predict_on_vllm_has_numtunes_read_out(served: Served, hf: NumericPredictor) -> None:
    assert served.ready()["engine"] == "vllm"
    body = {"model": "smol:1", "prompts": QUESTIONS, "max_new_tokens": 8, "samples": 8,
            "seed": 5, "interval_mass": 0.8}  # fmt: skip
    reply = served.post("/v1/predict", body)
    assert reply.status_code == 200, reply.text
    out = reply.json()["predictions"]
    expected = hf.predict(QUESTIONS, max_new_tokens=8, samples=0)
    assert [p["text"] for p in out] == [p.text for p in expected]
    assert [p["value"] for p in out] == [p.value for p in expected]
    for p in out:
        assert p["samples"] == 8 and p["parsed_samples"] == len(p["sampled_values"])
        if p["sampled_values"]:
            lo, hi = p["interval"]
            assert min(p["sampled_values"]) <= lo <= p["expected_value"] <= hi
    assert served.post("/v1/predict", body).json()["predictions"] == out  # seeded: the same
    assert served.ready()["models"] == {"vllm": 1, "hf": 0}


def test_openai_completions_on_vllm(served: Served, hf: NumericPredictor) -> None:
    client = openai.OpenAI(base_url=f"{served.url}/v1", api_key=served.token, max_retries=0)
    done = client.completions.create(model="smol:1", prompt="12 + 7 =", max_tokens=5, temperature=0)
    [expected] = hf.complete(["12 + 7 ="], max_new_tokens=5)
    assert done.choices[0].text == expected.text
    assert done.usage is not None and done.usage.prompt_tokens == expected.prompt_tokens
    pieces = client.completions.create(
        model="smol:1", prompt="12 + 7 =", max_tokens=5, temperature=0, stream=True
    )
    assert "".join(chunk.choices[0].text for chunk in pieces) == expected.text


def test_a_lora_version_decodes_on_its_bases_worker(
    served: Served, tmp_path_factory: pytest.TempPathFactory
) -> None:
    adapter = serving.smollm2_lora(tmp_path_factory.mktemp("lora") / "checkpoint")
    expected = NumericPredictor.from_checkpoint(adapter).predict(
        QUESTIONS, max_new_tokens=8, samples=0
    )  # peft on generate(), in this process
    body = {"model": "smol-lora:1", "prompts": QUESTIONS, "max_new_tokens": 8, "samples": 0}
    reply = served.post("/v1/predict", body)
    assert reply.status_code == 200, reply.text
    assert [p["text"] for p in reply.json()["predictions"]] == [p.text for p in expected]
    assert served.ready()["models"]["vllm"] == 2


def test_a_model_vllm_cannot_run_is_served_by_generate(served: Served) -> None:
    body = {"model": "digits:1", "prompts": ["3 + 4?"], "max_new_tokens": 3, "samples": 4}
    reply = served.post("/v1/predict", body)
    assert reply.status_code == 200, reply.text
    [p] = reply.json()["predictions"]
    assert p["text"].isdigit() and p["value"] == float(p["text"])
    assert served.ready()["models"] == {"vllm": 2, "hf": 1}
