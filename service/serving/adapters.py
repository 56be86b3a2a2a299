"""LoRA adapter versions on a serving replica: one base model per distinct base, every adapter
served on it loaded beside the others by name, the active one switched per model call.

A version with a base reference (`base.json`, jobs/records/models.py) is an adapter. Its first load
on a replica loads and verifies the base (jobs/modeling/adapters.py: source, then sha256) with the
adapter on; later adapters of the same base (same source and checksums) are added to that
model with peft's `load_adapter`, each from its own verified copy. Every adapter gets its own
`AdapterPredictor` (Serve's multiplexing keys them by version, as full models), all sharing
the one model; a call first makes its adapter the active one (`activate`). Serving holds the
replica's one compute turn around every model call, so switching is never concurrent with a
generation, and requests for the same adapter still batch into one call.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Any

import torch

from jobs.engines.vllm_engine import VLLM_PYTHON, EngineConfig
from jobs.infer import NumericPredictor
from jobs.infer.checkpoint_spec import read_checkpoint_spec
from jobs.modeling.adapters import is_adapter_folder, read_base
from jobs.modeling.folders import ModelUnavailableError
from jobs.modeling.model import load_base, load_checkpoint_model
from jobs.modeling.precision import serving_dtype
from jobs.records.models import SPEC, BaseReference
from jobs.spec import JobSpec
from service.registry import ModelVersion
from service.serving.adapter_engines import AdapterEngines
from service.serving.api import ServeConfig
from service.serving.limits import FairTurns

log = logging.getLogger(__name__)


class FromFolder(Enum):
    """`AdapterHost.load` without a parsed spec: read the folder's spec.json."""

    READ = "read"


FROM_FOLDER = FromFolder.READ


class AdapterPredictor(NumericPredictor):
    """A predictor over the replica's shared base model with the adapter `adapter` on."""

    adapter = "default"

    def activate(self) -> None:
        """Make this predictor's adapter the model's active one (under the compute turn)."""
        if self.model.active_adapter != self.adapter:
            self.model.set_adapter(self.adapter)


def activate(predictor: NumericPredictor) -> None:
    if isinstance(predictor, AdapterPredictor):
        predictor.activate()


class AdapterHost:
    """The replica's base models, one per distinct base reference, with their adapters."""

    def __init__(self, dtype: str = "auto", engine: EngineConfig | None = None) -> None:
        # The dtype models are served in (ServeConfig.dtype): "auto" is bfloat16 where the
        # CPU or GPU computes it natively (jobs/modeling/precision.py), else float32. Logits
        # reach the numeric read-out as float32 either way (generate() upcasts them).
        self.dtype = _dtype(dtype)
        self.engine = engine  # vLLM for full models where it runs (ServeConfig.engine)
        self.adapter_engines = AdapterEngines(engine)  # and for adapters
        self._bases: dict[str, Any] = {}  # base reference (JSON) -> the peft model on it
        self._names: dict[str, str] = {}  # version ref -> adapter name (module-name safe)
        self._refs: dict[str, list[str]] = {}  # base reference (JSON) -> version refs on it
        self._lock = threading.Lock()  # loads run in threads; one changes the models at once

    @property
    def bases_loaded(self) -> int:
        return len(self._bases)

    def adapters_on(self) -> dict[str, list[str]]:
        """{base source: the version refs loaded on it}, for tests and the replica's status."""
        return {_source(key): sorted(refs) for key, refs in self._refs.items()}

    def load(
        self, ref: str, folder: Path, spec: JobSpec | FromFolder | None = FROM_FOLDER
    ) -> NumericPredictor:
        """Version `ref` from its verified copy `folder`: an adapter onto its shared base, a
        full model on its own. `spec`: its spec as the registry's record parsed it
        (`checkpoint_spec`), so spec.json is not read again; by default (a folder alone, as
        the bench loads) the folder's spec.json."""
        if spec is FROM_FOLDER:
            spec = read_checkpoint_spec(folder)
        if is_adapter_folder(folder):
            return self.predictor(ref, folder, spec)
        model: Any = load_checkpoint_model(folder)
        model.to(self.dtype)  # in place: nn.Module.to returns the module itself
        full = None if self.engine is None else replace(self.engine, max_lora_rank=None)
        return NumericPredictor.from_spec(folder, spec, model=model, engine=full)

    def predictor(self, ref: str, folder: Path, spec: JobSpec | None) -> AdapterPredictor:
        """`folder` (a verified copy of version `ref`) as a predictor on its shared base."""
        key = read_base(folder).model_dump_json()
        with self._lock:
            # ref "arith:3" is not a module name (peft makes one per adapter): a counter is.
            name = self._names.setdefault(ref, f"adapter_{len(self._names)}")
            model = self._bases.get(key)
            if model is None:
                from peft import PeftModel

                base = load_base(read_base(folder))  # source, then its sha256: once per base
                self.adapter_engines.keep_base(key, base)
                model = PeftModel.from_pretrained(base, folder, adapter_name=name)
                self._bases[key] = model
                log.info("loaded base %s for adapter %s", _source(key), ref)
            elif name not in model.peft_config:
                model.load_adapter(folder, adapter_name=name)
                log.info("added adapter %s to its loaded base", ref)
            model.to(self.dtype)  # the base and every adapter on it, in the serving dtype
            if ref not in self._refs.setdefault(key, []):
                self._refs[key].append(ref)
            predictor = AdapterPredictor.from_spec(folder, spec, model=model)
            self.adapter_engines.serve(predictor, key, name, folder)
        predictor.adapter = name
        return predictor


def checkpoint_spec(version: ModelVersion) -> JobSpec | None:
    """What the predictor reads of the version's spec.json, from the record: None for a
    version without one (a plain model folder); ModelUnavailableError where the recorded
    spec (that file's copy) no longer validates, as reading the file would say."""
    if SPEC not in version.files:
        return None
    if version.spec is None:
        raise ModelUnavailableError(f"{version.ref}: its {SPEC} is not a valid job spec")
    return version.spec


def engine_config(serve: ServeConfig) -> EngineConfig | None:
    """How the replica starts vLLM workers, in its serving dtype; None: generate() alone."""
    if serve.engine != "vllm":
        return None
    dtype = "bfloat16" if _dtype(serve.dtype) == torch.bfloat16 else "float32"
    python = serve.vllm_python or VLLM_PYTHON
    return EngineConfig(
        python, dtype=dtype, kv_cache_gib=serve.vllm_kv_cache_gib,
        max_lora_rank=serve.vllm_max_lora_rank,
    )  # fmt: skip


def _dtype(name: str) -> torch.dtype:
    if name == "auto":
        return serving_dtype(torch.device("cpu"))
    return {"fp32": torch.float32, "bf16": torch.bfloat16}[name]


def _source(key: str) -> str:
    return BaseReference.model_validate_json(key).source


@contextlib.contextmanager
def turn_with(turns: FairTurns, owner: str, predictor: NumericPredictor) -> Iterator[None]:
    """The replica's compute turn for `owner`, with `predictor`'s adapter made active in it."""
    with turns.turn(owner):
        activate(predictor)
        yield
