"""`LossSpec` and `LossName`, built from the loss catalogue (jobs/losses/catalog.py).

The catalogue (standard library only) declares every loss and its parameters once; this
module turns each parameter into a pydantic field with the same default, range and
description, so a new loss is declared there and appears here, in the REST schema, the
sweeps' search spaces and the OpenAI `numeric_loss` field without an edit here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, create_model

from jobs.losses.catalog import LOSSES, Param, loss_names, multi_digit_losses, params
from jobs.spec.base import MULTI_DIGIT_PRESETS, Strict

# "ce" alone, or ce plus the numeric term of that name (jobs/losses/catalog.py).
LOSS_NAMES: tuple[str, ...] = loss_names()
LossName = Literal[LOSS_NAMES]  # type: ignore[valid-type]


def _field(param: Param) -> tuple[Any, Any]:
    """(annotation, FieldInfo) of one catalogue parameter."""
    bounds: dict[str, Any] = {"ge": param.ge, "gt": param.gt}
    bounds = {k: v for k, v in bounds.items() if v is not None}
    words: Any = Literal[param.choices] if param.choices else None
    if param.number and param.choices:  # a number or a word: the bound is the number's
        annotation: Any = Annotated[float, Field(**bounds)] | words
        return annotation, Field(param.default, description=param.description)
    annotation = float if param.number else words
    if param.nullable:
        annotation = annotation | None
    return annotation, Field(param.default, description=param.description, **bounds)


_FIELDS: dict[str, Any] = {
    "name": (
        LossName,
        Field(
            "ce",
            description=(
                "The loss: ce is cross entropy alone; every other name adds the numeric term "
                "of that name on number-token targets."
            ),
        ),
    ),
    **{param.name: _field(param) for param in params()},
}
_LossFields: Any = create_model("LossFields", __base__=Strict, **_FIELDS)


class LossSpec(_LossFields):
    """A numeric loss and its knobs; `total = ce + weight * numeric` (or the ratio mix)."""

    if TYPE_CHECKING:  # the fields are built above; the one the project reads by attribute
        name: str = "ce"


def check_digit_level(loss: LossSpec, source: str) -> None:
    """A ValueError naming `name` when a digit-level loss meets a model source whose
    tokenizer is known to have multi-digit number tokens (other sources: the job refuses it
    when it builds the loss)."""
    decl = LOSSES.get(loss.name)
    kind, _, preset = source.partition(":")
    if decl is not None and decl.digit_level and kind == "random" and preset in MULTI_DIGIT_PRESETS:
        raise ValueError(
            f"name: {loss.name} is defined on single-digit tokens (0-9); {source}'s tokenizer "
            f"has multi-digit number tokens. Use one of {', '.join(multi_digit_losses())}"
        )
