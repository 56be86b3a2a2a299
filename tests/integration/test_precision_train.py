"""train.precision through the real worker loop (Ray Train's in-process mode): `auto`
resolved on this machine's CPU (bf16 where it has bf16 units, fp32 where not: CI may have
neither) and bf16 weights with float32 master copies both train, and say in their reports
which precision ran."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from jobs.modeling.precision import bf16_available, resolve_precision
from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec, load_spec_file
from jobs.train.runner import build_trainer

pytestmark = [pytest.mark.ray, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-smmd.yaml"


@pytest.mark.parametrize("precision", ["auto", "bf16_weights"])
def test_precision_trains_and_is_reported(ray_cluster: str, storage: Path, precision: str) -> None:
    if precision == "bf16_weights" and not bf16_available(torch.device("cpu")):
        # Not a skip: the worker must refuse it by name on such a CPU.
        expected = None
    else:
        expected = resolve_precision(precision, torch.device("cpu"))  # type: ignore[arg-type]
    data: dict[str, Any] = load_spec_file(EXAMPLE)
    data["train"] |= {"steps": 4, "eval_every": 4, "checkpoint_every": 4, "warmup_steps": 0}
    data["train"]["precision"] = precision
    data["data"] |= {"train_size": 64, "eval_size": 4}
    spec = JobSpec.model_validate(data)
    files = RunFiles.for_job(f"precision-{precision}", str(storage))
    fit = build_trainer(spec, files, in_process=True).fit()
    if expected is None:
        assert fit.error is not None and "does not support bf16" in str(fit.error)
        return
    assert fit.error is None and fit.metrics is not None, fit.error
    assert fit.metrics["precision"] == expected
    assert math.isfinite(fit.metrics["loss"]) and fit.metrics["step"] == 4
    assert math.isfinite(fit.metrics["eval_loss"])
