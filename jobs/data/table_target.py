"""A table's target column read as numbers, row by row: its values (or only their count),
the most decimals any value has and the one unit every value carries (`3.5 kg` → kg). The
job reads a whole table (jobs/data/table.py); the control plane's submit check streams the
file through `check_stream`, holding one row at a time however large the table is."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from jobs.data.table_file import Row, TableParser, read_into
from jobs.data.types import DataError
from jobs.spec import DataSpec
from jobs.spec.table import MAX_DECIMALS

# Values read as missing: a feature shows as NA, a target is refused.
MISSING = frozenset({"", "NA", "N/A", "NaN", "nan", "null", "None"})
# A number, then optionally its unit ("3.5 kg", "12%").
NUMBER = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([^\d\s].*)?$")


@dataclass(frozen=True)
class Target:
    """The target column read as numbers, and how answers are written."""

    values: list[float]
    decimals: int
    units: str | None

    def answer(self, i: int) -> str:
        return f"{self.values[i]:.{self.decimals}f}"


def find_column(name: str, columns: list[str], role: str, table: str) -> int:
    if name not in columns:
        raise DataError(f"{table}: {role}: no column {name!r} (columns: {', '.join(columns[:20])})")
    return columns.index(name)


def check_columns(columns: list[str], data: DataSpec, table: str) -> int:
    """The target's column index, once every column the prompt shows is found too."""
    assert data.target is not None  # DataSpec requires it for the table task
    k = find_column(data.target, columns, "data.target", table)
    for name in data.shown_columns(columns):
        find_column(name, columns, "data.template" if data.template else "data.features", table)
    return k


@dataclass
class TargetReader:
    """Fed one target cell at a time (`add`), then `target()`; `keep` False counts only."""

    data: DataSpec
    keep: bool = True
    values: list[float] = field(default_factory=list)
    count: int = 0
    decimals: int = 0
    units: set[str | None] = field(default_factory=set)
    column: int | None = None  # set by whoever finds it in the header

    def add(self, cell: str, where: str) -> None:
        about = f"{where}: column {self.data.target!r} (the target)"
        if cell in MISSING:
            raise DataError(f"{about} is empty")
        match = NUMBER.match(cell)
        if match is None:
            raise DataError(f"{about}: {cell[:40]!r} is not a number")
        number, unit = match.groups()
        mantissa = number.lower().partition("e")[0]
        self.decimals = max(self.decimals, len(mantissa.partition(".")[2]))
        self.units.add(unit.strip() if unit else None)
        if len(self.units) > 1:
            shown = ", ".join(sorted(repr(u) for u in self.units))
            raise DataError(f"{about}: units differ ({shown})")
        self.count += 1
        if self.keep:
            self.values.append(float(number))

    def target(self, table: str) -> Target:
        (unit,) = self.units or {None}
        declared = self.data.units
        if declared is not None and unit is not None and unit != declared:
            raise DataError(f"{table}: data.units is {declared!r}, the values say {unit!r}")
        decimals = self.data.decimals
        given = decimals if decimals is not None else min(self.decimals, MAX_DECIMALS)
        return Target(self.values, given, declared or unit)


def check_stream(location: str, name: str, data: DataSpec) -> tuple[Target, int]:
    """The target (its decimals and units; no values kept) and the row count of a table
    file, read through one row at a time: DataError naming file, row and column."""
    reader = TargetReader(data, keep=False)

    def on_row(row: Row, where: str) -> None:
        if reader.column is None:
            reader.column = check_columns(parser.columns, data, name)
        reader.add(row[reader.column], where)

    parser = TableParser(name, keep=False, on_row=on_row)
    read_into(parser, location)
    return reader.target(name), reader.count
