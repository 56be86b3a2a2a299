"""Serving's image inputs without Ray: /v1/predict's `images` and the chat `image_url`
parts decode to checked bytes or a 422 naming the field, and the predictor answers an
image question with a value, samples and an interval."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from PIL import Image

from jobs.data.images import image_examples, png
from jobs.infer import InferenceRequestError, NumericPredictor
from jobs.modeling.model import load_model_and_tokenizer
from jobs.spec import ModelSpec
from service.errors import InvalidRequest
from service.serving.api import PredictRequest, Work, decode_image
from service.serving.calibration import plan
from service.serving.openai_api import ChatRequest

PNG = png(Image.new("RGB", (16, 16), "white"))
B64 = base64.b64encode(PNG).decode()


def problem(error: InvalidRequest) -> dict[str, str]:
    detail: Any = error.detail
    return dict(detail[0])


def test_images_decode_from_base64_and_data_urls() -> None:
    assert decode_image(B64, "images[0]") == PNG
    assert decode_image(f"data:image/png;base64,{B64}", "images[0]") == PNG
    for bad, needle in (
        ("not base64!", "not valid base64"),
        (base64.b64encode(b"plain text").decode(), "not a readable image"),
        (f"data:text/plain;base64,{B64}", "data:image/<type>;base64"),
    ):
        with pytest.raises(InvalidRequest) as caught:
            decode_image(bad, "images[2]")
        assert problem(caught.value)["field"] == "images[2]"
        assert needle in problem(caught.value)["message"]


def test_predict_takes_one_image_or_null_per_prompt() -> None:
    body = PredictRequest(model="m:1", prompts=["a", "b"], images=[B64, None])
    assert body.decoded_images() == [PNG, None]
    assert PredictRequest(model="m:1", prompts=["a"]).decoded_images() is None
    with pytest.raises(InvalidRequest) as caught:
        PredictRequest(model="m:1", prompts=["a", "b"], images=[B64]).decoded_images()
    assert problem(caught.value)["field"] == "images"


def chat(content: Any) -> ChatRequest:
    return ChatRequest.model_validate(
        {"model": "m:1", "messages": [{"role": "user", "content": content}]}
    )


def test_chat_content_parts_carry_the_question_and_one_data_url_image() -> None:
    url = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{B64}"}}
    request = chat([{"type": "text", "text": "How many dots?"}, url])
    assert (request.question, request.image()) == ("How many dots?", PNG)
    assert chat("plain").image() is None
    remote = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    with pytest.raises(InvalidRequest) as caught:
        chat([{"type": "text", "text": "q"}, remote]).image()
    assert problem(caught.value)["field"] == "messages[0].content[1].image_url.url"
    with pytest.raises(ValueError, match="one image per question"):
        chat([url, url])


def test_the_predictor_answers_an_image_question_with_value_samples_and_interval() -> None:
    model, tokenizer = load_model_and_tokenizer(ModelSpec(source="random:vlm-tiny"), seed=0)
    predictor = NumericPredictor(model, tokenizer, task="dots", use_chat_template=False)
    [example] = image_examples("dots", "train", 1, seed=0)
    assert isinstance(example.image, bytes)
    [p] = predictor.predict([example.prompt], images=[example.image], samples=8, seed=0,
                            max_new_tokens=3)  # fmt: skip
    assert p.samples == 8 and len(p.tokens) >= 1
    assert (p.interval is None) == (p.parsed_samples == 0)
    [c] = predictor.complete([example.prompt], images=[example.image], chat=True)
    assert c.prompt_tokens == 64 + predictor.prompt_tokens([example.prompt], chat=True)[0]
    # The replica's path: the request's options, planned, and its images beside them.
    body = PredictRequest(model="m:1", prompts=[example.prompt], samples=4, max_new_tokens=3,
                          images=[base64.b64encode(example.image).decode()])  # fmt: skip
    how = plan(body, None)
    work = Work("predict", "m:1", body.prompts, how.options, "ann", body.decoded_images())
    [served] = work.call(predictor, body.prompts)
    assert served.samples == 4
    assert work.group() != Work("predict", "m:1", body.prompts, how.options, "ann").group()
    text = NumericPredictor(*load_model_and_tokenizer(ModelSpec(source="random:tiny-char")))
    with pytest.raises(InferenceRequestError, match=r"images\[0\]: this model is text-only"):
        text.predict(["q"], images=[example.image])
