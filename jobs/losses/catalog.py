"""The loss catalogue: every loss's name and parameters, in the standard library only.

A loss is declared here once (`declare_loss`: its name, a one-line summary, the parameters it
reads, whether it is defined on single digits only) and its term is written in its own module
under `jobs/losses/` with `@register_term(name)`. Everything else is built from this table:
`LossConfig` (what `build_loss` takes, validated here), and the service's pydantic `LossSpec`
and `LossName` (jobs/spec/loss.py). Importing this module loads neither torch nor pydantic,
so the control plane reads it cheaply.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

ParamValue = float | str | None


@dataclass(frozen=True)
class Param:
    """One knob of a loss: its default, what it accepts, and a description for the API.

    It accepts a number (`number`, bounded by `ge`/`gt`), one of `choices`, or both (a
    number or a word such as "auto"); `nullable` admits None."""

    name: str
    default: ParamValue
    description: str
    number: bool = False
    choices: tuple[str, ...] = ()
    nullable: bool = False
    ge: float | None = None
    gt: float | None = None

    def check(self, value: object) -> ParamValue:
        """`value` as this parameter holds it, or a ValueError naming `loss.<name>`."""
        where = f"loss.{self.name}"
        if value is None and self.nullable:
            return None
        if isinstance(value, str) and value in self.choices:
            return value
        if self.number and isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
            if not math.isfinite(number):
                raise ValueError(f"{where}: must be finite, got {value!r}")
            if self.ge is not None and number < self.ge:
                raise ValueError(f"{where}: must be >= {self.ge}, got {value!r}")
            if self.gt is not None and number <= self.gt:
                raise ValueError(f"{where}: must be > {self.gt}, got {value!r}")
            return number
        accepted = [*(["a number"] if self.number else []), *map(repr, self.choices)]
        accepted += ["null"] if self.nullable else []
        raise ValueError(f"{where}: expected {' or '.join(accepted)}, got {value!r}")


@dataclass(frozen=True)
class LossDecl:
    """A numeric loss: `ce + weight · term`, the term registered under `name`."""

    name: str
    summary: str
    params: tuple[Param, ...]  # what its term reads besides weight and mixing
    # Defined on single-digit tokens (the ten digits 0-9): refused for other vocabularies.
    digit_level: bool = False


WEIGHT = Param(
    "weight",
    0.3,
    "λ, the numeric term's weight against cross entropy (every loss but ce).",
    number=True,
    ge=0,
)
MIXING = Param(
    "mixing",
    "additive",
    "How the numeric term joins cross entropy (every loss but ce): additive, "
    "ce + λ·numeric; ratio, ce + λ·stopgrad(ce / numeric)·numeric (the NTIL authors' mix).",
    choices=("additive", "ratio"),
)
KERNEL = Param(
    "kernel",
    "gaussian",
    "The kernel K over number-token values (mmd, smmd).",
    choices=("gaussian", "laplacian"),
)
BANDWIDTH = Param(
    "bandwidth", 2.0, "The kernel's bandwidth h, in value units (mmd, smmd).", number=True, gt=0
)
SQUASH = Param(
    "squash",
    None,
    "Maps every non-zero distance between number tokens linearly onto [1, squash] "
    "(emd, ntil's emd part, and the kernel of mmd and smmd); null keeps them as is.",
    number=True,
    nullable=True,
    ge=1,
)
DISTANCE = Param(
    "distance",
    "auto",
    "Value scale of the distance terms (emd, ntil's emd part, ntl_mse): |a - b|, or "
    "|log(1+a) - log(1+b)| which stays bounded for multi-digit number tokens (values up to "
    "999 made these terms dwarf cross entropy). auto: absolute when every number token is a "
    "single digit, log otherwise. Kernel terms (mmd, smmd) always use |a - b| with their "
    "bandwidth.",
    choices=("auto", "absolute", "log"),
)
SMOOTH_WEIGHT = Param(
    "smooth_weight",
    "auto",
    "α, the weight of Smooth-MMD's smoothing part rᵀ(D − K)r (smmd); auto: "
    "1 / (2 · mean row sum of K).",
    number=True,
    choices=("auto",),
    ge=0,
)
SIGMA = Param(
    "sigma",
    0.2,
    "σ: ntil weighs each number token's emd by (1 + σ)^(number tokens after it in its "
    "number), so leading digits count more (ntil).",
    number=True,
    ge=0,
)
ALPHA = Param(
    "alpha", 0.2, "Weight of ntil's relative error of whole numbers (ntil).", number=True, ge=0
)
BETA = Param(
    "beta",
    0.2,
    "Weight of ntil's magnitude (log-ratio) error of whole numbers (ntil).",
    number=True,
    ge=0,
)
GUMBEL_TAU = Param(
    "gumbel_tau",
    0.1,
    "Temperature of the straight-through Gumbel pick (ntil, ntil_value gumbel).",
    number=True,
    gt=0,
)
GUMBEL_NOISE = Param(
    "gumbel_noise",
    0.01,
    "Scale of the Gumbel noise; 0 picks the argmax (ntil, ntil_value gumbel).",
    number=True,
    ge=0,
)
NTIL_VALUE = Param(
    "ntil_value",
    "gumbel",
    "How ntil reads each number token's predicted value for its whole-number errors: a "
    "straight-through Gumbel pick, or the expectation over the number tokens.",
    choices=("gumbel", "expectation"),
)

# Every parameter above, in the spec's field order: stored specs and the study's run digests
# hash a spec's JSON, so this order stays; a new loss's own parameters come after these.
PARAMS: tuple[Param, ...] = (
    WEIGHT,
    MIXING,
    KERNEL,
    BANDWIDTH,
    SQUASH,
    DISTANCE,
    SMOOTH_WEIGHT,
    SIGMA,
    ALPHA,
    BETA,
    GUMBEL_TAU,
    GUMBEL_NOISE,
    NTIL_VALUE,
)
LOSSES: dict[str, LossDecl] = {}


def declare_loss(decl: LossDecl) -> LossDecl:
    """Add a loss to the catalogue; a parameter name means one `Param` across all losses."""
    if decl.name == "ce" or decl.name in LOSSES:
        raise ValueError(f"loss {decl.name!r} is declared twice (ce is the term-free loss)")
    known = {p.name: p for p in params()}
    for param in decl.params:
        if known.get(param.name, param) != param:
            raise ValueError(f"loss {decl.name!r}: parameter {param.name!r} differs elsewhere")
    LOSSES[decl.name] = decl
    return decl


def params() -> Iterator[Param]:
    """Every parameter once: PARAMS, then any other a loss declares, in declaration order."""
    seen: set[str] = set()
    for param in (*PARAMS, *(p for d in LOSSES.values() for p in d.params)):
        if param.name not in seen:
            seen.add(param.name)
            yield param


def loss_names() -> tuple[str, ...]:
    """ "ce" (cross entropy alone) and every declared numeric loss, in declaration order."""
    return ("ce", *LOSSES)


def multi_digit_losses() -> tuple[str, ...]:
    """The numeric losses defined for any number tokens (not only the ten digits)."""
    return tuple(name for name, decl in LOSSES.items() if not decl.digit_level)


declare_loss(LossDecl("emd", "Earth mover's distance to the target token", (SQUASH, DISTANCE)))
declare_loss(
    LossDecl(
        "ntil",
        "NTIL: digit-weighted EMD plus whole-number relative and magnitude errors",
        (SQUASH, DISTANCE, SIGMA, ALPHA, BETA, GUMBEL_TAU, GUMBEL_NOISE, NTIL_VALUE),
    )
)
declare_loss(LossDecl("mmd", "Maximum mean discrepancy", (KERNEL, BANDWIDTH, SQUASH)))
declare_loss(
    LossDecl("smmd", "Smooth-MMD", (KERNEL, BANDWIDTH, SQUASH, SMOOTH_WEIGHT)),
)
declare_loss(LossDecl("ntl_mse", "NTL-MSE: squared error of the expected value", (DISTANCE,)))
declare_loss(
    LossDecl("del", "DEL: probability- and place-weighted digit BCE", (), digit_level=True)
)
declare_loss(
    LossDecl("dist2", "DIST2: KL to a distance-smoothed digit target", (), digit_level=True)
)
declare_loss(LossDecl("ntl_number", "NTL's number-level relative error", ()))


@dataclass(frozen=True)
class LossConfig:
    """A loss and every parameter's value: what `build_loss` takes, pydantic-free.

    Build one with `LossConfig.make(name, **params)` (defaults filled, values checked) or
    `LossConfig.of(spec)` from anything with the same attributes (the service's LossSpec)."""

    name: str = "ce"
    values: Mapping[str, ParamValue] = field(
        default_factory=lambda: {p.name: p.default for p in params()}
    )

    @classmethod
    def make(cls, name: str = "ce", **given: object) -> LossConfig:
        if name not in loss_names():
            raise ValueError(f"loss.name: unknown loss {name!r}; known: {loss_names()}")
        declared = {p.name: p for p in params()}
        unknown = sorted(set(given) - set(declared))
        if unknown:
            raise ValueError(f"loss.{unknown[0]}: not a parameter of any loss")
        values = {k: p.check(given[k]) if k in given else p.default for k, p in declared.items()}
        return cls(name, values)

    @classmethod
    def of(cls, spec: object) -> LossConfig:
        """A LossConfig as is; a mapping, or an object with one attribute per parameter."""
        if isinstance(spec, LossConfig):
            return spec
        if isinstance(spec, Mapping):
            return cls.make(**spec)
        given = {p.name: getattr(spec, p.name) for p in params() if hasattr(spec, p.name)}
        return cls.make(str(getattr(spec, "name", "ce")), **given)

    @property
    def decl(self) -> LossDecl | None:
        """The numeric loss's declaration; None for ce."""
        return LOSSES.get(self.name)

    def number(self, key: str) -> float:
        value = self.values[key]
        if not isinstance(value, float):
            raise TypeError(f"loss.{key}: expected a number here, got {value!r}")
        return value

    def word(self, key: str) -> str:
        value = self.values[key]
        if not isinstance(value, str):
            raise TypeError(f"loss.{key}: expected one of its words here, got {value!r}")
        return value

    def optional_number(self, key: str) -> float | None:
        return None if self.values[key] is None else self.number(key)

    def with_values(self, **changes: ParamValue) -> LossConfig:
        """A copy with some values replaced (resolved ones such as smooth_weight's auto)."""
        return LossConfig(self.name, {**self.values, **changes})
