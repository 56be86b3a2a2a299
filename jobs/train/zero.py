"""The DeepSpeed ZeRO engine: stage 1/2/3 over the process group Ray Train set up.

Training state. `save_state` writes DeepSpeed's own checkpoint under `deepspeed/` of the
checkpoint folder: every rank its ZeRO shard (`zero_pp_rank_<r>_mp_rank_00_optim_states.pt`:
its 1/world of the fp32 master weights and Adam moments), rank 0 also the module/schedule file.
Every rank reports its folder to Ray Train, which merges them into one checkpoint; on resume
each rank loads its own shard back (`load_state`), with the schedule and step counters.
DeepSpeed's files are pickles: they are read with `weights_only=True`, allowing only the three
DeepSpeed classes they hold.

ZeRO-3 keeps 1/world of every parameter on each rank and gathers them inside each forward
(collectives). Generation runs a different number of forwards on each rank, so evaluation and
the consolidated safetensors use a plain copy of the model (`full_model`), refreshed from the
gathered parameters.

Offload (`offload_optimizer`, GPU jobs only: see DeepSpeedSpec) needs DeepSpeed's CPU Adam,
a C++ op compiled on first use; like the shared-memory op DeepSpeed compiles at its first
initialise on CPU, it is built once per machine under the numtune cache.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from jobs.modeling.adapters import fresh_copy
from jobs.spec import JobSpec
from jobs.spec.parts import ResolvedPrecision
from jobs.storage.paths import cache_dir
from jobs.train.checkpoint import STATE_DIR
from jobs.train.optim import build_optimizer, build_schedule, trainable_parameters

log = logging.getLogger(__name__)

TAG = "state"  # one state per checkpoint folder: a fixed tag, no `latest` pointer file
RECOVERY_SCRIPTS = ("zero_to_fp32.py", "zero_to_torch.py")  # DeepSpeed copies these; not needed


def extensions_dir() -> str:
    """Where DeepSpeed's C++ ops are compiled and found again: TORCH_EXTENSIONS_DIR if set,
    else the numtune cache (survives between jobs on the machine)."""
    return os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(cache_dir("torch_extensions")))


def _safe_checkpoint_engine(engine: Any) -> Any:
    """DeepSpeed's torch checkpoint engine (its default, and the one our config makes),
    loading with weights_only=True."""
    from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import TorchCheckpointEngine
    from deepspeed.runtime.fp16.loss_scaler import LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    allowed = [LossScaler, ZeroStageEnum, fragment_address]  # all the globals its files hold

    class WeightsOnly(TorchCheckpointEngine):
        def load(self, path: str, map_location: Any = None) -> Any:
            with torch.serialization.safe_globals(allowed):
                return torch.load(path, map_location=map_location, weights_only=True)

    assert type(engine.checkpoint_engine) is TorchCheckpointEngine
    return WeightsOnly(engine._config)


class DeepSpeedEngine:
    def __init__(
        self,
        model: PreTrainedModel,
        spec: JobSpec,
        steps: int,
        device: torch.device,
        precision: ResolvedPrecision,
    ):
        extensions_dir()  # before DeepSpeed builds or loads any op
        import deepspeed

        ds = spec.scaling.deepspeed
        assert ds is not None
        zero: dict[str, Any] = {"stage": ds.stage}
        if ds.offload_optimizer:
            zero["offload_optimizer"] = {"device": "cpu"}
        if ds.offload_params:
            zero["offload_param"] = {"device": "cpu"}
        config: dict[str, Any] = {
            "train_micro_batch_size_per_gpu": spec.train.batch_size,
            "gradient_accumulation_steps": spec.train.grad_accum,
            "zero_optimization": zero,
            # Either bf16 is DeepSpeed's: bf16 weights, float32 master copies and moments.
            "bf16": {"enabled": precision != "fp32"},
            "zero_allow_untested_optimizer": True,
        }
        if spec.train.max_grad_norm is not None:
            config["gradient_clipping"] = spec.train.max_grad_norm
        if ds.offload_optimizer:
            # DeepSpeed refuses a torch optimizer over offloaded state (ZeRORuntimeException).
            from deepspeed.ops.adam import DeepSpeedCPUAdam

            optimizer = DeepSpeedCPUAdam(
                trainable_parameters(model),
                lr=spec.train.lr,
                weight_decay=spec.train.weight_decay,
            )
        else:
            optimizer = build_optimizer(model, spec)
        self.unwrapped = model
        self.device = device
        self.stage = ds.stage
        # The schedule wraps the base optimizer; DeepSpeed steps it at accumulation boundaries
        # and saves and loads it with its checkpoint.
        self.scheduler = build_schedule(optimizer, spec, steps)
        self.ds, _, _, _ = deepspeed.initialize(
            model=torch.nn.Module.to(model, device),
            optimizer=optimizer,
            lr_scheduler=self.scheduler,
            config=config,
        )
        self.ds.checkpoint_engine = _safe_checkpoint_engine(self.ds)
        self.model = self.ds
        self._plain: PreTrainedModel | None = None  # ZeRO-3's consolidated copy

    def accumulating(self, last: bool) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # DeepSpeed counts micro-steps itself

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # precision is the engine's (bf16 config)

    def backward(self, loss: torch.Tensor) -> None:
        self.ds.backward(loss, scale_wrt_gas=False)
        self.ds.step()  # a no-op until the accumulation boundary

    def step(self) -> torch.Tensor:
        norm = self.ds.get_global_grad_norm()
        return torch.tensor(float("nan") if norm is None else float(norm))

    def lr(self) -> float:
        return float(self.scheduler.get_last_lr()[0])

    def save_state(self, folder: Path, rank: int) -> None:
        """Every rank (a collective): its ZeRO shard into `folder/deepspeed/state/`."""
        self.ds.save_checkpoint(str(folder / STATE_DIR), tag=TAG, save_latest=False)
        for script in RECOVERY_SCRIPTS:
            # Code has no place in a checkpoint the registry may copy: only rank 0 writes them.
            (folder / STATE_DIR / script).unlink(missing_ok=True)

    def load_state(self, folder: Path) -> None:
        if not (folder / STATE_DIR / TAG).is_dir():
            # A checkpoint written before numtune saved DeepSpeed's state: weights only.
            log.warning("%s holds no DeepSpeed state; the optimizer starts afresh", folder)
            return
        path, _ = self.ds.load_checkpoint(
            str(folder / STATE_DIR),
            tag=TAG,
            load_optimizer_states=True,
            load_lr_scheduler_states=True,
        )
        if path is None:
            raise RuntimeError(f"DeepSpeed could not load its state from {folder / STATE_DIR}")

    @contextlib.contextmanager
    def full_model(self) -> Iterator[PreTrainedModel]:
        """The whole model with no collective in its forward (every rank enters: ZeRO-3
        gathers)."""
        if self.stage != 3:
            yield self.unwrapped
            return
        import deepspeed

        if self._plain is None:
            plain = fresh_copy(self.unwrapped)  # an adapter job's: base + adapter
            torch.nn.Module.to(plain, self.device)
            plain.generation_config = self.unwrapped.generation_config
            self._plain = plain.eval().requires_grad_(False)
        # Inside the block every parameter holds its full tensor; copy them out, then let
        # ZeRO-3 drop the gathered copies again.
        with deepspeed.zero.GatheredParameters(list(self.unwrapped.parameters())):
            self._plain.load_state_dict(self.unwrapped.state_dict(), strict=True)
        yield self._plain
