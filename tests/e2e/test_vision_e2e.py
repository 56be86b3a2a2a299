"""Issue 20's "Must show", real everything: examples/tiny-vlm-dots.yaml (a tiny Llava on the
dot-counting task) over REST → succeeded → registered → /v1/predict with an image answers
with a parsed value and an interval → the `openai` client's chat completion with an
`image_url` content part (a data URL) answers; a bad image is a 422 naming it; an image
uploaded to /v1/files (purpose vision) is named by its file id in both."""

from __future__ import annotations

import base64

import httpx
import openai
import pytest

from jobs.data.images import image_examples
from jobs.spec import load_spec_file
from tests.e2e.conftest import EXAMPLE, Numtune, registered_model, wait_for_job

pytestmark = [pytest.mark.ray, pytest.mark.slow]
SPEC = EXAMPLE.with_name("tiny-vlm-dots.yaml")


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def test_image_job_is_registered_and_served_with_images(shared_numtune: Numtune) -> None:
    numtune = shared_numtune
    http = numtune.http()
    spec = load_spec_file(SPEC) | {"register_as": "dots"}
    job = http.post("/v1/jobs", json=spec).json()
    done = wait_for_job(http, job["id"], 300)
    assert done["status"] == "succeeded", done
    model = registered_model(http, "dots")
    version = model["versions"][0]
    assert version["spec"]["data"]["task"] == "dots" and "model.safetensors" in version["files"]
    assert version["calibration"]["n"] == 16  # calibrated on images too

    # Held-out pictures the job never trained on (another seed), as base64 and a data URL.
    pictures = image_examples("dots", "interpolate", 3, seed=99)
    headers = dict(http.headers)
    body = {
        "model": "dots:1",
        "prompts": [ex.prompt for ex in pictures],
        "images": [base64.b64encode(pictures[0].image).decode(), data_url(pictures[1].image),
                   data_url(pictures[2].image)],
        "samples": 8, "max_new_tokens": 4, "temperature": 0.5, "seed": 0,
    }  # fmt: skip
    reply = httpx.post(f"{numtune.serve_url}/v1/predict", json=body, headers=headers, timeout=120)
    assert reply.status_code == 200, reply.text
    predictions = reply.json()["predictions"]
    assert len(predictions) == 3
    assert any(p["value"] is not None for p in predictions), predictions
    for p in predictions:
        if p["parsed_samples"]:
            lo, hi = p["interval"]
            assert lo <= p["expected_value"] <= hi and p["std"] >= 0
    assert any(p["parsed_samples"] for p in predictions), predictions

    bad = {**body, "images": [None, "bm90IGFuIGltYWdl", None]}  # base64 of "not an image"
    refused = httpx.post(f"{numtune.serve_url}/v1/predict", json=bad, headers=headers)
    assert refused.status_code == 422 and "images[1]" in refused.text, refused.text

    # The same picture uploaded (purpose vision) and named by its file id: the same answer.
    uploaded = http.post("/v1/files", files={"file": ("dots.png", pictures[0].image)},
                         data={"purpose": "vision"})  # fmt: skip
    assert uploaded.status_code == 201, uploaded.text
    file_id = uploaded.json()["id"]
    twice = {**body, "prompts": [pictures[0].prompt] * 2, "samples": 0,
             "images": [file_id, data_url(pictures[0].image)]}  # fmt: skip
    reply = httpx.post(f"{numtune.serve_url}/v1/predict", json=twice, headers=headers, timeout=60)
    assert reply.status_code == 200, reply.text
    by_id, inline = reply.json()["predictions"]
    assert by_id["text"] == inline["text"], (by_id, inline)

    client = openai.OpenAI(base_url=f"{numtune.serve_url}/v1", api_key=headers["authorization"][7:])
    parts = [
        {"type": "text", "text": pictures[0].prompt},
        {"type": "image_url", "image_url": {"url": data_url(pictures[0].image)}},
    ]
    chat = client.chat.completions.create(
        model="dots:1", messages=[{"role": "user", "content": parts}], max_tokens=4, temperature=0
    )
    assert isinstance(chat.choices[0].message.content, str)
    parts[1] = {"type": "image_url", "image_url": {"url": file_id}}
    by_file = client.chat.completions.create(
        model="dots:1", messages=[{"role": "user", "content": parts}], max_tokens=4, temperature=0
    )
    assert by_file.choices[0].message.content == chat.choices[0].message.content
    with pytest.raises(openai.UnprocessableEntityError, match="data URL"):
        client.chat.completions.create(
            model="dots:1", max_tokens=4,
            messages=[{"role": "user", "content": [
                {"type": "text", "text": "How many dots are there?"},
                {"type": "image_url", "image_url": {"url": "http://example.com/dots.png"}},
            ]}],
        )  # fmt: skip
