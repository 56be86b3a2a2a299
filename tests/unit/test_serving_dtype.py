"""The dtype a serving replica holds models in (ServeConfig.dtype, service/serving/adapters.py):
fp32 and bf16 as asked, auto from what the CPU computes natively (jobs/modeling/precision.py);
answers keep their shape and the digit writer's digits in either dtype."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from jobs.modeling.precision import serving_dtype
from service.serving.adapters import AdapterHost
from service.serving.api import ServeConfig
from tests.support.serving import digit_writer


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return digit_writer(tmp_path_factory.mktemp("dtype") / "ckpt")


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("fp32", torch.float32),
        ("bf16", torch.bfloat16),
        ("auto", serving_dtype(torch.device("cpu"))),
    ],
)
def test_models_are_served_in_the_configured_dtype(
    folder: Path, name: str, dtype: torch.dtype
) -> None:
    predictor = AdapterHost(name).load("digits:1", folder)
    assert {p.dtype for p in predictor.model.parameters()} == {dtype}
    [answer] = predictor.predict(["What is 1 + 2?"], max_new_tokens=3, samples=4, seed=0)
    assert answer.text.isdigit() and len(answer.text) == 3  # every token a digit
    assert answer.value is not None and answer.expected_value is not None
    assert answer.parsed_samples == 4 and answer.interval is not None


def test_the_setting_is_checked() -> None:
    assert ServeConfig().dtype == "auto"
    with pytest.raises(ValueError, match="dtype"):
        ServeConfig(dtype="fp16")
