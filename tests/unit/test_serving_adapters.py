"""Adapter versions on a serving replica without Ray (service/serving/adapters.py): one base
loaded for two adapters, the active adapter switched per call with each answering as when
loaded alone, full models loaded as before."""

from __future__ import annotations

from pathlib import Path

import torch
from fastapi.testclient import TestClient

from jobs.modeling.model import load_checkpoint_model
from service.serving.adapters import AdapterHost, AdapterPredictor, checkpoint_spec, turn_with
from service.serving.limits import FairTurns
from tests.support.adapters import finished, spec
from tests.support.registry import client

__all__ = ["client"]  # the fixture, imported for the tests below


def test_two_adapters_share_one_base_and_switch_per_call(client: TestClient) -> None:
    registry = client.app.state.services.registry  # type: ignore[attr-defined]
    for loss in ("ce", "smmd"):
        registry.register_job(finished(client, spec("random:tiny-digit", loss=loss))[0])
    registry.register_job(finished(client, spec("random:tiny-digit", None))[0])  # arith:3
    # fp32: each answer is compared with the checkpoint loaded alone (float32) to 1e-6.
    host, turns = AdapterHost(dtype="fp32"), FairTurns()
    alone, predictors = {}, {}
    for ref in ("arith:1", "arith:2", "arith:3"):
        version = registry.resolve(ref)
        with registry.verified_copy(version) as folder:
            predictors[ref] = host.load(ref, folder, checkpoint_spec(version))
            alone[ref] = load_checkpoint_model(folder).eval()
    a, b, full = predictors["arith:1"], predictors["arith:2"], predictors["arith:3"]
    assert isinstance(a, AdapterPredictor) and isinstance(b, AdapterPredictor)
    assert not isinstance(full, AdapterPredictor)  # a full model is loaded on its own
    assert host.bases_loaded == 1 and a.model is b.model  # one base for both adapters
    assert host.adapters_on() == {"random:tiny-digit": ["arith:1", "arith:2"]}

    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        want = {ref: alone[ref](input_ids=ids).logits for ref in ("arith:1", "arith:2")}
        assert not torch.allclose(want["arith:1"], want["arith:2"])  # two different adapters
        for ref in ("arith:1", "arith:2", "arith:1"):  # switch back and forth
            with turn_with(turns, "alice", predictors[ref]):
                got = predictors[ref].model(input_ids=ids).logits
            assert torch.allclose(got, want[ref], atol=1e-6), ref
    # Both answer through the predictor API, each under its own adapter.
    for ref in ("arith:1", "arith:2"):
        with turn_with(turns, "alice", predictors[ref]):
            [out] = predictors[ref].complete(["What is 1 + 2?"], max_new_tokens=3)
        assert isinstance(out.text, str)


def test_loading_the_same_adapter_again_reuses_it(client: TestClient, tmp_path: Path) -> None:
    registry = client.app.state.services.registry  # type: ignore[attr-defined]
    registry.register_job(finished(client, spec("random:tiny-digit"))[0])
    host = AdapterHost()
    for _ in range(2):  # Serve's LRU may drop a predictor and load the version again
        version = registry.resolve("arith:1")
        with registry.verified_copy(version) as folder:
            predictor = host.load("arith:1", folder, checkpoint_spec(version))
    assert isinstance(predictor, AdapterPredictor)
    assert list(predictor.model.peft_config) == [predictor.adapter]
