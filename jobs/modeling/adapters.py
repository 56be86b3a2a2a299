"""LoRA adapters (the `peft` library) on a frozen base model.

Training wraps the loaded base with a fresh adapter (`wrap`): only the adapter's A and B
matrices are trainable. An adapter's checkpoint folder holds the adapter alone
(`adapter_model.safetensors`, `adapter_config.json`), its tokenizer, spec and metrics, and
`base.json` (jobs/records/models.py `BaseReference`): the base's source and the sha256 of its
weights as they were loaded. Loading an adapter folder (jobs/modeling/model.py `load_adapter`:
resume, `registry:` sources, serving) rebuilds the base from that reference, refuses it when it
is gone (`BaseMissingError`) or its checksum differs (`BaseChangedError`), then puts the
adapter on (`attach`).

peft is imported only where an adapter is used (it costs seconds at import): a job without
`model.adapter` never loads it, and `is_adapter` answers without it.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import sys
from pathlib import Path
from typing import Any, cast

import torch
from transformers import PreTrainedModel

from jobs.modeling.folders import ADAPTER_CONFIG, ModelUnavailableError, bundled_dir
from jobs.records.models import BASE, TENSORS_KEY, BaseReference
from jobs.spec import AdapterSpec, ModelSpec
from jobs.storage.artifacts import sha256_file

log = logging.getLogger(__name__)

ADAPTER_WEIGHTS = "adapter_model.safetensors"
PEFT_MODEL_CARD = "README.md"  # peft writes a model card next to the adapter; not served
_BASE_ATTR = "numtune_base"  # the BaseReference rides on the wrapped model into checkpoints


class BaseModelError(ModelUnavailableError):
    """An adapter's base model cannot be had as the adapter was trained on it."""


class BaseMissingError(BaseModelError):
    """The base an adapter names is gone (a deleted folder or version, a missing package)."""


class BaseChangedError(BaseModelError):
    """The base's weights are not the ones the adapter was trained on (sha256 differs)."""


def is_adapter(model: object) -> bool:
    """A peft-wrapped model. Only this module imports peft, so before it did none is."""
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)


def is_adapter_folder(folder: Path) -> bool:
    return (folder / ADAPTER_CONFIG).is_file()


def base_of(model: object) -> BaseReference | None:
    found = getattr(model, _BASE_ATTR, None)
    return found if isinstance(found, BaseReference) else None


def inner_model(model: PreTrainedModel) -> PreTrainedModel:
    """The transformers model inside a peft wrapper (its LoRA layers injected in place): its
    `lm_head` is still the plain head, which the fused linear loss reads."""
    if not is_adapter(model):
        return model
    return cast(PreTrainedModel, cast(Any, model).get_base_model())


# ---- checksums ------------------------------------------------------------------------------


def tensor_digest(model: torch.nn.Module) -> str:
    """sha256 over the state dict (name, dtype, shape, bytes in name order): the checksum of
    weights that are not a file of ours (random: presets are rebuilt from their seed)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}|{flat.dtype}|{tuple(tensor.shape)}\n".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def base_reference(spec: ModelSpec, model: torch.nn.Module, seed: int) -> BaseReference:
    """The reference to a base as loaded from `spec` (before any adapter is put on)."""
    kind, _, rest = spec.source.partition(":")
    sha: dict[str, str]
    if kind == "registry" and spec.pinned is not None:
        # Its bytes were hashed as they were copied for loading (jobs/storage/artifacts.py).
        sha = {k: v for k, v in spec.pinned.files.items() if k.endswith(".safetensors")}
    elif kind == "bundled" or Path(spec.source).expanduser().is_dir():
        folder = bundled_dir(rest) if kind == "bundled" else Path(spec.source).expanduser()
        sha = {p.name: sha256_file(p) for p in sorted(folder.glob("*.safetensors"))}
    else:  # random: presets and Hub ids
        sha = {TENSORS_KEY: tensor_digest(model)}
    return BaseReference(source=spec.source, seed=seed, pinned=spec.pinned, sha256=sha)


# ---- training and saving --------------------------------------------------------------------


def lora_config(adapter: AdapterSpec) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=adapter.r,
        # Hinted int by peft; it only scales the update by alpha / r, so a float is exact.
        lora_alpha=cast(int, adapter.alpha),
        lora_dropout=adapter.dropout,
        target_modules=list(adapter.target_modules),
        task_type="CAUSAL_LM",
    )


def wrap(model: PreTrainedModel, spec: ModelSpec, seed: int) -> PreTrainedModel:
    """`model` frozen under a fresh LoRA adapter of `spec.adapter`; its base reference
    attached. The same `seed` gives every rank the same initial A (B starts at zero)."""
    from peft import get_peft_model

    assert spec.adapter is not None
    if is_adapter(model):
        raise ValueError(
            f"model.adapter: {spec.source!r} is itself an adapter; train a new adapter on its"
            " base, or drop model.adapter"
        )
    reference = base_reference(spec, model, seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            wrapped = get_peft_model(model, lora_config(spec.adapter))
        except ValueError as error:  # e.g. no module matches target_modules
            raise ValueError(f"model.adapter.target_modules: {error}") from error
    setattr(wrapped, _BASE_ATTR, reference)
    # PeftModel forwards every attribute it lacks (config, generate, save_pretrained's
    # callers' needs) to the model it wraps: to the loop it is the model.
    return cast(PreTrainedModel, wrapped)


def merged(model: PreTrainedModel) -> PreTrainedModel:
    """The adapter folded into its base's weights (W + (alpha / r) B A): a plain model."""
    if not is_adapter(model):
        return model
    return cast(PreTrainedModel, cast(Any, model).merge_and_unload())


def prepared(model: PreTrainedModel, spec: ModelSpec, seed: int) -> PreTrainedModel:
    """A loaded model made ready to train: a registered adapter version merged into its base
    (so it can serve as a base itself), then wrapped in a fresh adapter if the spec asks."""
    model = merged(model)
    return model if spec.adapter is None else wrap(model, spec, seed)


def save_adapter_files(out_dir: Path, model: PreTrainedModel) -> None:
    """After `model.save_pretrained(out_dir)` of an adapter: its base.json, no model card."""
    reference = base_of(model)
    if reference is None:
        raise ModelUnavailableError("an adapter without its base reference cannot be saved")
    (out_dir / PEFT_MODEL_CARD).unlink(missing_ok=True)
    (out_dir / BASE).write_text(reference.model_dump_json(indent=2))


def fresh_copy(model: PreTrainedModel) -> PreTrainedModel:
    """An empty model of the same shape (ZeRO-3's consolidated copy), adapter included."""
    if not is_adapter(model):
        return type(model)(model.config)
    from peft import get_peft_model

    inner = inner_model(model)
    config = copy.deepcopy(cast(Any, model).peft_config["default"])
    wrapped = get_peft_model(type(inner)(inner.config), config)
    setattr(wrapped, _BASE_ATTR, base_of(model))
    return cast(PreTrainedModel, wrapped)


# ---- loading --------------------------------------------------------------------------------


def read_base(folder: Path) -> BaseReference:
    path = folder / BASE
    if not path.is_file():
        raise ModelUnavailableError(f"adapter folder {folder} has no {BASE}: its base is unknown")
    return BaseReference.model_validate_json(path.read_text(encoding="utf-8"))


def attach(
    base: PreTrainedModel, folder: Path, reference: BaseReference, *, trainable: bool = False
) -> PreTrainedModel:
    """`base`, loaded and verified from `reference`, with the adapter of `folder` on;
    `trainable` to resume training."""
    from peft import PeftModel

    if not (folder / ADAPTER_WEIGHTS).is_file():
        raise ModelUnavailableError(f"adapter folder {folder} has no {ADAPTER_WEIGHTS}")
    wrapped = PeftModel.from_pretrained(base, folder, is_trainable=trainable)
    setattr(wrapped, _BASE_ATTR, reference)
    log.info("loaded adapter %s on base %s", folder, reference.source)
    return cast(PreTrainedModel, wrapped)
