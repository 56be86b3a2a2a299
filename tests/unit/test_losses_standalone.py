"""`jobs.losses` stands alone: torch and the standard library, no service contract."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from jobs.losses import LossConfig, NumericVocab, build_loss
from jobs.losses.catalog import LOSSES, loss_names, params
from jobs.spec import LOSS_NAMES, LossSpec

PROBE = """
import sys
import jobs.losses
from jobs.losses import LossConfig, build_loss, compute_loss_func
from jobs.losses.terms import TERMS
loaded = sorted(m for m in ("pydantic", "yaml", "jobs.spec", "service") if m in sys.modules)
print(",".join(loaded) or "none", "torch" in sys.modules, len(TERMS))
"""


def test_importing_the_losses_loads_no_pydantic_yaml_or_spec() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["none", "True", str(len(LOSSES))]


def test_the_catalogue_alone_loads_no_torch() -> None:
    probe = "import sys, jobs.losses.catalog; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.stdout.split() == ["False"], out.stderr


def test_the_spec_is_built_from_the_catalogue() -> None:
    assert loss_names() == LOSS_NAMES
    assert list(LossSpec.model_fields) == ["name", *(p.name for p in params())]
    for param in params():
        field = LossSpec.model_fields[param.name]
        assert field.default == param.default
        assert field.description == param.description


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"name": "cubic"}, "loss.name"),
        ({"weight": -1.0}, "loss.weight"),
        ({"bandwidth": 0.0}, "loss.bandwidth"),
        ({"mixing": "product"}, "loss.mixing"),
        ({"smooth_weight": "never"}, "loss.smooth_weight"),
        ({"squash": float("nan")}, "loss.squash"),
        ({"sigmaa": 1.0}, "loss.sigmaa"),
    ],
)
def test_config_refuses_what_the_spec_refuses(given: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LossConfig.make(**given)
    with pytest.raises(ValueError, match=message.split(".")[1]):
        LossSpec.model_validate(given)


def test_a_config_and_the_spec_give_the_same_loss() -> None:
    vocab = NumericVocab(list(range(10)), [float(i) for i in range(10)])
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 6, 16, generator=gen)
    labels = torch.randint(0, 16, (2, 6), generator=gen)
    given = {"name": "smmd", "weight": 0.7, "squash": 3.0, "kernel": "laplacian"}
    ours = build_loss(LossConfig.make(**given), vocab)(logits, labels)
    theirs = build_loss(LossSpec(**given), vocab)(logits, labels)
    assert ours.numeric > 0
    assert torch.equal(ours.total, theirs.total)
    assert LossConfig.of(LossSpec(**given)) == LossConfig.make(**given)
