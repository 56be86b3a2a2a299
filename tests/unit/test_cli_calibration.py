"""`numtune models calibrate --file`: a bad file is a usage error naming the flag and the
line, before anything is sent; `models show`'s calibration column (its wide flag:
tests/unit/test_calibration_serving.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from service.cli.calibration import read_examples, summary


def test_examples_file_rows_and_their_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "val.jsonl"
    good.write_text('{"prompt": "1 + 1?", "answer": 2}\n\n{"prompt": "3?", "answer": "3"}\n')
    assert read_examples(good) == [{"prompt": "1 + 1?", "answer": "2"},
                                   {"prompt": "3?", "answer": "3"}]  # fmt: skip
    for text, expected in (('{"prompt": "1?"}\n', ":1 needs the keys prompt and answer"),
                           ('{"prompt": "1?", "answer": 1}\nnot json\n', ":2 is not JSON"),
                           ("\n", "holds no rows")):  # fmt: skip
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text)
        with pytest.raises(typer.Exit) as stopped:
            read_examples(bad)
        assert stopped.value.exit_code == 2
        err = capsys.readouterr().err
        assert err.startswith("numtune: --file: ") and expected in err
    with pytest.raises(typer.Exit):
        read_examples(tmp_path / "missing.jsonl")


def test_summary_line() -> None:
    assert summary({}) == "not calibrated"
    interval = {"coverage": 0.9, "coverage_low": 0.85, "coverage_high": 0.93,
                "relative_width_median": 0.42, "wide": False}  # fmt: skip
    level = {"level": 0.9, "sampled": {"coverage": 0.976}, "calibrated": interval,
             "nested_parameter": 0.8}  # fmt: skip
    record = {"n": 40, "samples": 16, "best": "median", "levels": [level]}
    assert summary(record) == "n=40 K=16 best=median 90%: 0.98→0.90 [0.85, 0.93] rel.width 0.42"
