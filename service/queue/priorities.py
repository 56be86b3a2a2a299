"""Priority classes: a small set of names the admin puts in order (NUMTUNE_PRIORITY_CLASSES,
lowest first), a default class for jobs that name none (NUMTUNE_PRIORITY_DEFAULT) and which
owners may use the classes above the default (NUMTUNE_PRIORITY_GRANTS, e.g.
"high=alice|bob;urgent=carol"). Everyone may use the default and every class below it;
admin tokens may use every class.

Admission orders queued jobs by class, higher first, and keeps its fair order within a
class (service/queue/admission.py); a job that waits for resources may have lower-class running
jobs paused for it (service/queue/preemption.py). Plain rules here: no SQL, no Ray.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobs.spec import JobSpec, TuneSpec

if TYPE_CHECKING:  # settings import this module: the CLI must not load SQLAlchemy for it
    from service.store import JobRow

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


@dataclass(frozen=True)
class PriorityClasses:
    names: tuple[str, ...] = ("low", "normal", "high")  # lowest first
    default: str = "normal"
    grants: Mapping[str, frozenset[str]] = field(default_factory=dict)  # class -> owners

    def rank(self, name: str | None) -> int:
        """Its place in the order (0: lowest). A class the admin no longer defines (a job
        stored before the classes changed) ranks as the default."""
        if name in self.names:
            return self.names.index(name)
        return self.names.index(self.default)

    def unknown(self, name: str) -> str | None:
        """Why `name` is no class here, or None."""
        if name in self.names:
            return None
        return f"unknown priority class {name!r}; the classes are {', '.join(self.names)}"

    def allowed(self, name: str, owner: str, admin: bool = False) -> bool:
        """Whether `owner` may submit jobs of class `name` (a known class)."""
        if admin or self.rank(name) <= self.rank(self.default):
            return True
        return owner in self.grants.get(name, frozenset())

    def refusal(self, name: str, owner: str) -> str:
        """Why `owner` may not use `name` (other owners' grants are not theirs to read)."""
        open_ = ", ".join(self.names[: self.rank(self.default) + 1])
        return (
            f"{owner} may not use priority class {name!r}: the admin grants it to named "
            f"owners (NUMTUNE_PRIORITY_GRANTS); everyone may use {open_}"
        )


def parse_classes(text: str) -> tuple[str, ...]:
    """NUMTUNE_PRIORITY_CLASSES: comma-separated names, lowest first, each once."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise ValueError("name at least one priority class")
    for name in names:
        if not NAME.match(name):
            raise ValueError(f"{name!r} is not a class name (a-z, 0-9, - and _; 32 at most)")
    if len(set(names)) != len(names):
        raise ValueError(f"a class is named twice in {text!r}")
    return names


def parse_grants(text: str, names: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """NUMTUNE_PRIORITY_GRANTS: `class=owner|owner` entries separated by ';' (or ',')."""
    grants: dict[str, frozenset[str]] = {}
    for entry in re.split(r"[;,]", text):
        if not entry.strip():
            continue
        name, sep, owners = entry.partition("=")
        name = name.strip()
        if not sep or name not in names:
            raise ValueError(f"{entry.strip()!r}: want class=owner|owner with a class of {names}")
        found = {owner.strip() for owner in owners.split("|") if owner.strip()}
        grants[name] = grants.get(name, frozenset()) | found
    return grants


def spec_priority(spec: JobSpec | TuneSpec) -> str | None:
    """The class a spec asks for: a job's own, a sweep's base's (the sweep queues as one)."""
    return spec.base.priority if isinstance(spec, TuneSpec) else spec.priority


def class_of(row: JobRow) -> str | None:
    """spec_priority() of a stored job, read from its stored JSON (validated when it was
    submitted) without building the typed spec: a pass over thousands of queued jobs."""
    spec = row.spec_json if isinstance(row.spec_json, dict) else {}
    if row.kind == "tune":
        spec = spec.get("base") or {}
    name = spec.get("priority") if isinstance(spec, dict) else None
    return name if isinstance(name, str) else None
