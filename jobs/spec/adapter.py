"""A LoRA adapter on the job's model (`model.adapter`).

Plain pydantic like the rest of the contract: no torch or peft here (jobs/modeling/adapters.py does
the wrapping, saving and verified loading; jobs/records/models.py has `base.json`, the reference an
adapter keeps to its base).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from jobs.spec.base import Strict

# A module name peft matches against the model's module paths ("q_proj", "mlp.down_proj").
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class AdapterSpec(Strict):
    """Train a low-rank adapter (the `peft` library's LoRA) instead of every weight: the base
    stays frozen, and checkpoints and registered versions hold the adapter alone."""

    type: Literal["lora"] = "lora"
    r: int = Field(8, ge=1, le=1024, description="The rank of each low-rank update A·B.")
    alpha: float = Field(
        16.0, gt=0, le=1_000_000, description="LoRA's α: the update is scaled by α / r."
    )
    dropout: float = Field(
        0.0, ge=0, lt=1, description="Dropout on the adapter's input during training."
    )
    target_modules: tuple[str, ...] = Field(
        ("q_proj", "v_proj"),
        min_length=1,
        max_length=64,
        description=(
            "Names of the linear layers that get an adapter (matched against the end of each "
            "module's path). The LM head is left out by default, so the fused linear loss "
            "still reads a plain head."
        ),
    )

    @field_validator("target_modules")
    @classmethod
    def _module_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [name for name in v if not _MODULE.match(name)]
        if bad:
            raise ValueError(f"{bad} are not module names (like q_proj or mlp.down_proj)")
        if len(set(v)) != len(v):
            raise ValueError("each module is named once")
        return v
