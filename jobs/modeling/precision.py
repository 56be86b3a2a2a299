"""The floating-point precision a job trains in (or a replica serves in), from what the
device computes natively.

`train.precision` (jobs/spec/parts.py) names one of:

    fp32          every tensor float32
    bf16          autocast: float32 weights and optimizer state, matmuls in bfloat16
    bf16_weights  weights, activations and gradients in bfloat16; the optimizer steps float32
                  master copies with float32 moments (jobs/train/master.py; DeepSpeed's bf16)
    auto          AUTO_BF16 where the device has native bf16, else fp32

Native bf16 is checked on the machine that runs, never assumed: a CUDA GPU whose bf16 is
not emulated (Ampere and later), or a CPU whose flags name a bf16 instruction set (x86
AMX-BF16 or AVX512-BF16, Arm's BF16) and for which oneDNN has bf16 kernels. A CPU that
oneDNN merely emulates bf16 on (plain AVX512) counts as not native: `auto` stays fp32 there,
while an explicit `bf16` is still allowed (`bf16_available`). The numeric losses compute in
float32 on their slice whatever the model's dtype (jobs/losses).
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import torch

from jobs.spec.parts import Precision, ResolvedPrecision

log = logging.getLogger(__name__)

# What `auto` becomes on native-bf16 hardware. Autocast keeps float32 master weights in the
# model itself (nothing to rebuild on resume, checkpoints stay float32); bench/train_precision.py
# measures it against fp32 and bf16_weights.
AUTO_BF16: ResolvedPrecision = "bf16"
# /proc/cpuinfo flags that mean bf16 arithmetic in hardware (x86 "flags", Arm "Features").
BF16_CPU_FLAGS = frozenset({"amx_bf16", "avx512_bf16", "bf16"})
CPUINFO = Path("/proc/cpuinfo")


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The first processor's feature flags; empty where /proc/cpuinfo is absent or unreadable
    (macOS, Windows, a sandbox): no flag read means no bf16 assumed."""
    try:
        text = CPUINFO.read_text(errors="replace")
    except OSError as error:
        log.info("no CPU flags (%s): bf16 not assumed", error)
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return frozenset(value.split())
    return frozenset()


def bf16_available(device: torch.device) -> bool:
    """bf16 runs on `device` at all without crawling (oneDNN kernels, possibly emulated on
    AVX512; a GPU's native or emulated bf16): what an explicit `bf16` needs."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return False


def bf16_native(device: torch.device) -> bool:
    """bf16 is computed in hardware on `device`: what `auto` chooses bf16 for."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    if device.type == "cpu":
        return bool(BF16_CPU_FLAGS & cpu_flags()) and bf16_available(device)
    return False


def resolve_precision(requested: Precision, device: torch.device) -> ResolvedPrecision:
    """The precision a run asking for `requested` uses on `device`: itself, or for `auto`
    AUTO_BF16 where the device has native bf16 and fp32 elsewhere."""
    if requested != "auto":
        return requested
    chosen: ResolvedPrecision = AUTO_BF16 if bf16_native(device) else "fp32"
    log.info("precision auto on %s: %s", device, chosen)
    return chosen


def weights_dtype(precision: ResolvedPrecision) -> torch.dtype:
    """The dtype the model's parameters are held in under `precision`."""
    return torch.bfloat16 if precision == "bf16_weights" else torch.float32


def serving_dtype(device: torch.device) -> torch.dtype:
    """The dtype to serve a model in on `device`: bfloat16 where it is native, else float32."""
    return torch.bfloat16 if bf16_native(device) else torch.float32
