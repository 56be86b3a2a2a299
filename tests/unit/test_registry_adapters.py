"""Registry versions of LoRA adapter jobs: the adapter alone plus its base reference, lineage
with both, every load verified (the adapter's files and its base's sha256), and refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from jobs.infer import NumericPredictor
from jobs.modeling.adapters import BaseChangedError, BaseMissingError, is_adapter
from jobs.modeling.folders import save_pretrained_safetensors
from jobs.modeling.model import export_merged, load_checkpoint_model, load_model_and_tokenizer
from jobs.records.models import TENSORS_KEY
from jobs.spec import ModelSpec
from tests.support.adapters import finished, spec
from tests.support.registry import ADMIN, client

__all__ = ["client"]  # the fixture, from the support package

ADAPTER_FILES = {"adapter_model.safetensors", "adapter_config.json", "base.json"}


def _bytes(folder: Path, names: Any) -> int:
    return sum((folder / n).stat().st_size for n in names if n.endswith(".safetensors"))


def test_an_adapter_version_holds_the_adapter_and_names_its_base(client: TestClient) -> None:
    registry = client.app.state.services.registry  # type: ignore[attr-defined]
    full = registry.register_job(finished(client, spec("random:tiny-digit", None))[0])
    row = registry.register_job(finished(client, spec("random:tiny-digit"))[0])
    assert set(row.files) >= ADAPTER_FILES and "model.safetensors" not in row.files
    root = Path(registry.storage_uri) / "registry" / "arith"
    # The adapter's weights are a few per cent of the full model's.
    assert _bytes(root / "v2", row.files) < 0.05 * _bytes(root / "v1", full.files)

    auth = {"Authorization": f"Bearer {ADMIN}"}
    info = client.get("/v1/models/arith/versions/2", headers=auth).json()
    assert info["adapter"]["r"] == 4 and info["base"]["source"] == "random:tiny-digit"
    assert set(info["base"]["sha256"]) == {TENSORS_KEY} and "base" not in info["metrics"]
    plain = client.get("/v1/models/arith/versions/1", headers=auth).json()
    assert plain["adapter"] is None and plain["base"] is None

    # Serving's path: the verified copy of the listed files, then the verified base.
    with registry.verified_copy(registry.resolve("arith:2")) as folder:
        predictor = NumericPredictor.from_checkpoint(folder)
    assert is_adapter(predictor.model)
    [answer] = predictor.predict(["What is 1 + 2?"], samples=0, max_new_tokens=3)
    assert answer.text is not None


def test_a_version_whose_base_is_gone_or_changed_is_refused(
    client: TestClient, tmp_path: Path
) -> None:
    base, tokenizer = load_model_and_tokenizer(ModelSpec(source="random:tiny-digit"), seed=0)
    base_dir = save_pretrained_safetensors(base, tokenizer, tmp_path / "base")
    registry = client.app.state.services.registry  # type: ignore[attr-defined]
    registry.register_job(finished(client, spec(str(base_dir)))[0])
    version = registry.resolve("arith:1")
    assert version.base is not None and version.base.sha256.keys() == {"model.safetensors"}

    other, _ = load_model_and_tokenizer(ModelSpec(source="random:tiny-digit"), seed=7)
    save_pretrained_safetensors(other, tokenizer, base_dir)  # same path, other weights
    with (
        registry.verified_copy(version) as folder,
        pytest.raises(BaseChangedError, match=r"not the one it was trained on.*model\.safetensors"),
    ):
        NumericPredictor.from_checkpoint(folder)
    for path in base_dir.iterdir():
        path.unlink()
    base_dir.rmdir()
    with (
        registry.verified_copy(version) as folder,
        pytest.raises(BaseMissingError, match=r"base model .* cannot be loaded"),
    ):
        NumericPredictor.from_checkpoint(folder)

    # Serving answers both with a 409 that says which.
    from service.serving.deployment import MODEL_ERRORS

    def code(error: Exception) -> tuple[int, str]:
        return next(v for t, v in MODEL_ERRORS.items() if isinstance(error, t))

    assert code(BaseChangedError("x")) == (409, "base_changed")
    assert code(BaseMissingError("x")) == (409, "base_missing")


def test_an_adapter_version_merges_for_export_and_as_a_base(
    client: TestClient, tmp_path: Path
) -> None:
    registry = client.app.state.services.registry  # type: ignore[attr-defined]
    registry.register_job(finished(client, spec("random:tiny-digit"))[0])
    ids = torch.tensor([[5, 6, 7, 8]])
    with registry.verified_copy(registry.resolve("arith:1")) as folder:
        adapted = load_checkpoint_model(folder).eval()
        out = export_merged(folder, tmp_path / "merged")
    assert (out / "model.safetensors").is_file() and (out / "spec.json").is_file()
    alone = load_checkpoint_model(out).eval()
    assert not is_adapter(alone)
    with torch.no_grad():
        assert torch.allclose(alone(input_ids=ids).logits, adapted(input_ids=ids).logits, atol=1e-5)

    # A job naming the adapter version as its source trains on the merged model.
    ref, pinned = registry.pin("arith:1", None)
    source = ModelSpec(source=f"registry:{ref}", pinned=pinned)
    model, _ = load_model_and_tokenizer(source)
    assert not is_adapter(model)
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, adapted(input_ids=ids).logits, atol=1e-5)
    stacked, _ = load_model_and_tokenizer(
        source.model_copy(update={"adapter": spec("x").model.adapter})
    )
    assert is_adapter(stacked)
