"""The fields a table task adds to `DataSpec` (jobs/spec/parts.py): which column is the
target, which columns the prompt shows and how, and how the target is written.

A table is a CSV or JSONL file of rows (`data.file`, an upload of purpose `table`;
`data.path`, a file inside the data roots; or `bundled:<name>`, a real table that ships in
a package numtune installs: BUNDLED_TABLES below). The target's decimals and units are
declared, or inferred from the rows and written into the spec at submit, so the run's
`spec.json` says how every answer was written.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from pydantic import Field, ValidationInfo, field_validator, model_validator

from jobs.spec.base import Strict

# A placeholder in a prompt template: a column's name in braces, nothing else (no format
# specs or attribute access: the template is data, never code).
PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


@dataclass(frozen=True)
class Bundled:
    """A real table that ships inside a package numtune installs (read offline)."""

    package: str
    file: str
    # Rows with none of these measured are dropped (the file marks them NA).
    measured: tuple[str, ...]


# `path: bundled:<name>`. Palmer penguins (Gorman, Williams & Fraser 2014; data CC0, package
# MIT): 344 penguins of three species, bill and flipper sizes, sex, island and year; the 2
# with no measurement at all are dropped, leaving 342.
BUNDLED_TABLES = {
    "penguins": Bundled(
        "palmerpenguins",
        "data/penguins.csv",
        ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"),
    ),
}
MAX_DECIMALS = 6
UNITS = re.compile(r"^[^\d\s{}][^{}\n]{0,23}$")


ABOUT = {
    "target": "table: the column to predict",
    "features": "table: the columns the default prompt shows (default: every other one)",
    "template": (
        "table: the prompt, columns named in braces ({bill_length_mm}); default: one "
        "`name: value` line per feature, then `What is <target>?`"
    ),
    "decimals": "table: decimals of every answer (default: the most the target has)",
    "units": (
        "table: the target's units, named in the default question (default: the unit "
        "every target value carries, as in `3.5 kg`, or none)"
    ),
}


def table_location(path: str) -> str:
    """A table's file: a bundled table's inside its package (its path unchanged when the
    package is not installed: reading it then fails naming it), else the path itself."""
    name = path.removeprefix("bundled:")
    table = BUNDLED_TABLES.get(name) if name != path else None
    found = importlib.util.find_spec(table.package) if table is not None else None
    if table is None or found is None or not found.submodule_search_locations:
        return path
    return str(Path(found.submodule_search_locations[0]) / table.file)


def placeholders(template: str) -> list[str]:
    """The column names a template shows, in order of first use."""
    return list(dict.fromkeys(PLACEHOLDER.findall(template)))


class TableFields(Strict):
    """`data.task: table`: these fields; other tasks leave them unset."""

    target: str | None = Field(None, min_length=1, max_length=200, description=ABOUT["target"])
    features: tuple[str, ...] | None = Field(None, max_length=200, description=ABOUT["features"])
    template: str | None = Field(None, min_length=1, max_length=4000, description=ABOUT["template"])
    decimals: int | None = Field(None, ge=0, le=MAX_DECIMALS, description=ABOUT["decimals"])
    units: str | None = Field(None, description=ABOUT["units"])

    @field_validator("template", "units")
    @classmethod
    def _well_formed(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            return v
        if info.field_name == "template" and not placeholders(v):
            raise ValueError("the template names no column: put one in braces, as {age}")
        if info.field_name == "units" and not UNITS.match(v):
            raise ValueError("units: up to 24 characters, not starting with a digit or space")
        return v

    @model_validator(mode="after")
    def _table_fields(self) -> Self:
        task = getattr(self, "task", None)
        given = [f for f in TableFields.model_fields if getattr(self, f) is not None]
        if task != "table":
            if given:
                raise ValueError(f"{given[0]}: only the table task has a target column")
            return self
        if self.target is None:
            raise ValueError("target: the table task needs the column to predict")
        shown = placeholders(self.template) if self.template else list(self.features or ())
        if self.target in shown:
            raise ValueError(f"template: shows the target column {self.target!r} (the answer)")
        if self.template is not None and self.features is not None:
            raise ValueError("features: give a template or the features, not both")
        return self

    def shown_columns(self, columns: list[str]) -> list[str]:
        """The columns the prompt shows, given the table's columns."""
        if self.template is not None:
            return placeholders(self.template)
        if self.features is not None:
            return list(self.features)
        return [c for c in columns if c != self.target]
