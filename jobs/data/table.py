"""Table → number tasks: rows of a CSV or JSONL table (jobs/data/table_file.py), a target
column to predict, the other columns shown in the prompt.

The prompt is the declared template with each `{column}` replaced by the row's value, or by
default one `name: value` line per feature column then `What is <target>?` (missing values
show as NA). The answer is the target written with `decimals` decimals. Without a separate
held-out file, `eval_size` rows are held out by a shuffle seeded with `data.seed`, so the
split is reproducible from the run's spec.json; a study's runs share one data seed, so
every arm (and the gradient-boosting reference, jobs/reference) sees the same split.

Every problem is a DataError naming the file, the row and the column.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from jobs.data.table_file import Row, TableParser, read_into
from jobs.data.table_target import (
    MISSING,
    Target,
    TargetReader,
    check_columns,
    check_stream,
    find_column,
)
from jobs.data.types import DataError, Example, TaskData
from jobs.spec import DataSpec
from jobs.spec.table import BUNDLED_TABLES, PLACEHOLDER, table_location

__all__ = ["MISSING", "Table", "TableSplit", "Target", "check_table", "read_table", "split_table"]


@dataclass(frozen=True)
class Table:
    name: str
    columns: list[str]
    rows: list[Row]
    lines: list[int]

    def column(self, name: str, role: str) -> int:
        return find_column(name, self.columns, role, self.name)

    def where(self, i: int) -> str:
        return f"{self.name}: row {i + 1} (line {self.lines[i]})"


def read_table(path: str, name: str | None = None) -> Table:
    """The whole table (DataError with the first problems); `name` is how errors name it."""
    parser = read_into(TableParser(name or path), table_location(path))
    table = Table(name or path, parser.columns, parser.rows, parser.lines)
    return _measured(table, path) if path.startswith("bundled:") else table


def _measured(table: Table, path: str) -> Table:
    """A bundled table without its rows that measured nothing."""
    measured = BUNDLED_TABLES[path.removeprefix("bundled:")].measured
    keep = [table.column(c, "bundled") for c in measured]
    picked = [i for i, r in enumerate(table.rows) if any(r[k] not in MISSING for k in keep)]
    rows, lines = [table.rows[i] for i in picked], [table.lines[i] for i in picked]
    return Table(table.name, table.columns, rows, lines)


def read_target(table: Table, data: DataSpec) -> Target:
    """Every row's target as a number; the decimals and units declared, or inferred (the
    most decimals any value has; the unit every value carries)."""
    k = check_columns(table.columns, data, table.name)
    reader = TargetReader(data)
    for i, row in enumerate(table.rows):
        reader.add(row[k], table.where(i))
    return reader.target(table.name)


def prompt(table: Table, row: Row, data: DataSpec, units: str | None) -> str:
    """One row's question (the module's docstring says how)."""

    def value(name: str) -> str:
        cell = row[table.columns.index(name)]
        return "NA" if cell in MISSING else cell

    if data.template is not None:
        return PLACEHOLDER.sub(lambda m: value(m.group(1)), data.template)
    lines = [f"{name}: {value(name)}" for name in data.shown_columns(table.columns)]
    unit = f" (in {units})" if units else ""
    return "\n".join([*lines, f"What is {data.target}{unit}?"])


@dataclass(frozen=True)
class TableSplit:
    """The training and held-out rows of a table task, with their targets."""

    table: Table
    train: list[int]  # row indices into `table` (or `held_table`)
    held: list[int]
    target: Target
    held_table: Table
    held_target: Target

    def examples(self, data: DataSpec) -> TaskData:
        def made(table: Table, target: Target, rows: list[int]) -> list[Example]:
            units = self.target.units
            return [
                Example(prompt(table, table.rows[i], data, units), target.answer(i)) for i in rows
            ]

        return TaskData(
            "table",
            made(self.table, self.target, self.train),
            made(self.held_table, self.held_target, self.held),
        )


def split_table(data: DataSpec, names: dict[str, str] | None = None) -> TableSplit:
    """The rows a table job trains on and is scored on (deterministic in `data.seed`);
    `names`: how messages name each path (an upload by its file id, not where it is kept)."""
    assert data.path is not None  # DataSpec (or the control plane) gives the table's path
    names = names or {}
    table = read_table(data.path, names.get(data.path))
    target = read_target(table, data)
    if data.eval_path:
        held_table = read_table(data.eval_path, names.get(data.eval_path))
        same = data.model_copy(update={"decimals": target.decimals, "units": target.units})
        held_target = read_target(held_table, same)
        train = list(range(len(table.rows)))[: data.train_size]
        held = list(range(len(held_table.rows)))[: data.eval_size]
        return TableSplit(table, train, held, target, held_table, held_target)
    n = len(table.rows)
    if n <= data.eval_size:
        raise DataError(f"data.eval_size: {table.name} has {n} rows; hold out fewer than that")
    order = list(range(n))
    random.Random(data.seed).shuffle(order)
    held = order[: data.eval_size]
    taken = set(held)
    train = [i for i in range(n) if i not in taken][: data.train_size]
    return TableSplit(table, train, held, target, table, target)


def table_task(data: DataSpec) -> TaskData:
    return split_table(data).examples(data)


def check_table(data: DataSpec, names: dict[str, str]) -> dict[str, object]:
    """Read the table (and its held-out file) through as the job will, one row at a time
    (a bundled table, small and known, is read whole): DataError naming file, row and
    column; else the decimals and units to record in the spec. `names`: how messages name
    each path (an upload by its file id)."""
    assert data.path is not None
    if data.path.startswith("bundled:") and not data.eval_path:
        target = split_table(data, names).target
        return {"decimals": target.decimals, "units": target.units}
    name = names.get(data.path, data.path)
    target, rows = check_stream(table_location(data.path), name, data)
    if data.eval_path:
        same = data.model_copy(update={"decimals": target.decimals, "units": target.units})
        held = names.get(data.eval_path, data.eval_path)
        check_stream(table_location(data.eval_path), held, same)
    elif rows <= data.eval_size:
        raise DataError(f"data.eval_size: {name} has {rows} rows; hold out fewer than that")
    return {"decimals": target.decimals, "units": target.units}
