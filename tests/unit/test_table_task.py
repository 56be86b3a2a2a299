"""Table → number tasks (issue 42 item 1): the table reader, the prompt and answer a row
becomes, the seeded split, the spec's rules, and the bundled Palmer penguins example."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jobs.data import DataError, load_task
from jobs.data.table import check_table, read_table, split_table
from jobs.data.table_file import TableParser
from jobs.data.tokenize import encode_prompt
from jobs.modeling.tokenizers import load_tokenizer
from jobs.records.provenance import provenance
from jobs.spec import DataSpec, load_job_spec, load_spec_file
from jobs.spec.study import StudySpec

ROOT = Path(__file__).resolve().parents[2]
CSV = (
    '\ufeffname,note,size,price\r\n"Ann, Jr.","two\nlines",3,12.5 kg\r\n'
    'Bob,"say ""hi""",NA,7 kg\r\nCy,,4,10.25 kg\r\n'
)


def table(tmp_path: Path, text: str = CSV, name: str = "t.csv") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return str(path)


def data(path: str, **fields: Any) -> DataSpec:
    return DataSpec(task="table", path=path, **({"target": "price", "eval_size": 1} | fields))


@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
def test_the_parser_reads_quotes_bom_and_crlf_alike_in_any_chunking(chunk: int) -> None:
    parser = TableParser("t.csv")
    raw = CSV.encode()
    for at in range(0, len(raw), chunk):
        parser.feed(raw[at : at + chunk])
    parser.finish()
    assert parser.problems == []
    assert parser.columns == ["name", "note", "size", "price"]
    assert parser.rows[0] == ["Ann, Jr.", "two\nlines", "3", "12.5 kg"]
    assert parser.rows[1][1] == 'say "hi"' and parser.lines == [2, 4, 5]


def test_jsonl_tables_read_like_csv(tmp_path: Path) -> None:
    rows = '{"x": "5\\" tall", "ok": true, "y": 3}\n\n{"x": null, "ok": false, "y": 4}\n'
    got = read_table(table(tmp_path, rows, "t.jsonl"))
    assert got.columns == ["x", "ok", "y"]
    assert got.rows == [['5" tall', "true", "3"], ["", "false", "4"]] and got.lines == [1, 3]


def test_a_row_becomes_a_prompt_and_an_answer_with_the_inferred_decimals_and_units(
    tmp_path: Path,
) -> None:
    spec = data(table(tmp_path))
    split = split_table(spec)
    assert (split.target.decimals, split.target.units) == (2, "kg")
    assert split.target.values == [12.5, 7.0, 10.25]
    task = load_task(spec)
    bob = next(e for e in task.train + task.eval if e.prompt.startswith("name: Bob"))
    assert bob.prompt == 'name: Bob\nnote: say "hi"\nsize: NA\nWhat is price (in kg)?'
    assert bob.answer == "7.00"
    declared = load_task(data(spec.path or "", template="{name} has {size}.", decimals=1))
    assert sorted(e.prompt for e in declared.train + declared.eval)[0] == "Ann, Jr. has 3."
    assert {e.answer for e in declared.train + declared.eval} == {"12.5", "7.0", "10.2"}
    assert check_table(spec, {}) == {"decimals": 2, "units": "kg"}


def test_the_held_out_rows_are_a_seeded_split_or_the_eval_file(tmp_path: Path) -> None:
    rows = "x,y\n" + "".join(f"{i},{i * 2}\n" for i in range(40))
    path = table(tmp_path, rows)
    spec = DataSpec(task="table", path=path, target="y", eval_size=10, seed=3)
    first, again = split_table(spec), split_table(spec)
    assert first.held == again.held and len(first.held) == 10
    assert set(first.held).isdisjoint(first.train) and len(first.train) == 30
    assert split_table(spec.model_copy(update={"seed": 4})).held != first.held
    held = table(tmp_path, "x,y\n100,200\n101,202\n", "held.csv")
    task = load_task(spec.model_copy(update={"eval_path": held}))
    assert [e.answer for e in task.eval] == ["200", "202"] and len(task.train) == 40
    # A sweep's validation split is carved from the training rows, never the held-out ones.
    val = load_task(spec.model_copy(update={"eval_split": "validation"}))
    assert len(val.train) == 20 and len(val.eval) == 10
    assert {e.prompt for e in val.eval}.isdisjoint(e.prompt for e in load_task(spec).eval)


@pytest.mark.parametrize(("text", "fields", "message"), [
    ("x,y\n1,2\n2,a lot\n", {}, "row 2 (line 3): column 'y' (the target): 'a lot' is not"),
    ("x,y\n1,2 kg\n2,3 lb\n", {}, "row 2 (line 3): column 'y' (the target): units differ"),
    ("x,y\n1,2 kg\n2,3 kg\n", {"units": "g"}, "data.units is 'g', the values say 'kg'"),
    ("x,y\n1,2\n", {"target": "z"}, "data.target: no column 'z' (columns: x, y)"),
    ("x,y\n1,2\n2,3\n", {"features": ["w"]}, "data.features: no column 'w'"),
])  # fmt: skip
def test_a_table_the_spec_cannot_use_is_refused_naming_row_and_column(
    tmp_path: Path, text: str, fields: dict[str, Any], message: str
) -> None:
    spec = data(table(tmp_path, text), **({"target": "y"} | fields))
    with pytest.raises(DataError, match=r"t\.csv") as caught:
        split_table(spec)
    assert message in str(caught.value)


@pytest.mark.parametrize(("fields", "message"), [
    ({"task": "table"}, "target: the table task needs the column to predict"),
    ({"task": "jsonl", "target": "y"}, "target: only the table task"),
    ({"task": "table", "target": "y", "template": "{y} and {x}"}, "shows the target column"),
    ({"task": "table", "target": "y", "template": "no column"}, "names no column"),
    ({"task": "table", "target": "y", "path": "bundled:iris"}, "bundled tables are penguins"),
    ({"task": "add", "path": "bundled:penguins"}, "only the jsonl and table tasks read files"),
])  # fmt: skip
def test_the_spec_refuses_table_fields_that_cannot_work(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        DataSpec.model_validate({"path": "/data/t.csv"} | fields)


def test_the_bundled_penguins_example_is_real_short_and_reproducible() -> None:
    job = load_job_spec(ROOT / "examples/table-penguins.yaml")
    study = StudySpec.model_validate(load_spec_file(ROOT / "examples/studies/table-penguins.yaml"))
    assert study.base.data == job.data.model_copy(update={"seed": 0})
    assert study.primaries == ["mae", "interval_score_90"]
    split = split_table(job.data)
    assert len(split.table.rows) == 342  # 344 penguins, the 2 never measured dropped
    assert len(split.train) == 278 and len(split.held) == 64
    assert split.target.decimals == 0 and split.target.units is None
    task = load_task(job.data)
    assert task.eval[0].prompt.endswith("mm. Body mass in g?") and task.eval[0].answer.isdigit()
    tok = load_tokenizer("smollm2")
    lengths = [len(encode_prompt(tok, e.prompt, False)) for e in task.train + task.eval]
    assert max(lengths) <= 60  # 47 measured; the budget is ~96 with the answer
    # The run's provenance hashes the package's file the table was read from.
    digest = provenance(job).data_sha256["bundled:penguins"]
    assert len(digest) == 64 and int(digest, 16) >= 0


def test_the_submit_check_holds_one_row_however_large_the_table(tmp_path: Path) -> None:
    # 12,000 rows, 0.3 MB: the job reads it whole (lists of str: 4.3 MB traced), the control
    # plane's check streams it (peak ~0.28 MB at any size: a 64 KB chunk's lines, one row).
    rows = "".join(f"{i},{i % 7}.5,town{i % 13},{i * 3}.25\n" for i in range(12_000))
    path = table(tmp_path, "a,b,city,y\n" + rows)
    spec = DataSpec(task="table", path=path, target="y", eval_size=64)
    tracemalloc.start()
    try:
        recorded = check_table(spec, {path: "file-x"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert recorded == {"decimals": 2, "units": None}
    assert peak < 1_000_000, peak
    bad = table(tmp_path, "a,y\n" + "1,2\n" * 5_000 + "3,x\n", "bad.csv")
    with pytest.raises(DataError, match=r"file-y: row 5001 \(line 5002\): column 'y'"):
        check_table(spec.model_copy(update={"path": bad}), {bad: "file-y"})
