"""LoRA adapter versions on vLLM (NUMTUNE_SERVE_ENGINE=vllm): one vLLM worker per base model
with multi-LoRA on, every adapter of that base one of its LoRAs, so requests for different
adapters of a base decode in one vLLM batch.

The worker gets the base exactly as the replica verified and loaded it (saved before peft
wraps it), and each adapter's peft files copied out of its verified copy (that copy is gone
once the version is loaded), all in a folder the replica keeps while it runs. An adapter of
a rank above `vllm_max_lora_rank`, or a base vLLM cannot run, stays on generate() with the
shared peft model (service/serving/adapters.py)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from jobs.engines.vllm_engine import EngineConfig, VllmEngine, start_engine
from jobs.infer import NumericPredictor
from jobs.modeling.adapters import ADAPTER_WEIGHTS

ADAPTER_CONFIG = "adapter_config.json"  # peft's: rank, alpha, target modules


class AdapterEngines:
    """The replica's vLLM workers for adapter bases, one per base, started on first use."""

    def __init__(self, engine: EngineConfig | None) -> None:
        # None: generate() serves every adapter. Full models' workers start without LoRA;
        # a base's worker takes adapters up to its config's max_lora_rank.
        self.engine = engine
        self._dir = tempfile.TemporaryDirectory(prefix="numtune-vllm-")
        self._bases: dict[str, Path] = {}  # base key -> the folder its worker loads
        self._engines: dict[str, VllmEngine | None] = {}  # None: vLLM cannot run that base
        self._ids: dict[str, int] = {}  # adapter name -> vLLM's integer id for it

    def keep_base(self, key: str, base: Any) -> None:
        """Save `base` (verified and loaded, not yet wrapped by peft) for its worker."""
        if self.engine is not None:
            folder = Path(self._dir.name) / f"base_{len(self._bases)}"
            base.save_pretrained(folder, safe_serialization=True)
            self._bases[key] = folder

    def serve(self, predictor: NumericPredictor, key: str, name: str, folder: Path) -> None:
        """Decode adapter `name` (verified copy `folder`) on its base's worker from now on,
        where vLLM can; otherwise leave `predictor` on generate()."""
        rank = int(json.loads((folder / ADAPTER_CONFIG).read_text())["r"])
        limit = 0 if self.engine is None else self.engine.max_lora_rank or 0
        if self.engine is None or key not in self._bases or rank > limit:
            return
        if key not in self._engines:
            eos = predictor.tokenizer.eos_token_id
            self._engines[key] = start_engine(self._bases[key], eos, self.engine)
        engine = self._engines[key]
        if engine is None:
            return
        copy = Path(self._dir.name) / name
        if not copy.exists():
            copy.mkdir()
            for file in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
                shutil.copyfile(folder / file, copy / file)
        lora = (name, self._ids.setdefault(name, len(self._ids) + 1), str(copy))
        predictor.use_engine(engine, lora=lora, owned=False)
