"""The demo's plan and tables (its whole run is tests/e2e/test_demo.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from rich.console import Console

from jobs.spec import JobSpec
from service.cli.demo import EXAMPLE, demo_specs, main
from service.cli.demo_report import metrics_table, next_steps, served_cell


def render(table: object) -> str:
    console = Console(record=True, width=200)
    console.print(table)
    return console.export_text()


def test_the_ce_twin_differs_from_the_example_only_in_its_loss_and_name() -> None:
    numeric, ce = demo_specs(EXAMPLE, steps=None, eval_size=None)
    assert numeric["loss"]["name"] != "ce" and ce["loss"] == {"name": "ce"}
    assert ce["name"] == ce["register_as"] != numeric["register_as"]
    same = {k for k in numeric if k not in ("name", "register_as", "loss")}
    assert {k: numeric[k] for k in same} == {k: ce[k] for k in same}
    for spec in (numeric, ce):
        JobSpec.model_validate(spec)


def test_a_quicker_demo_shortens_training_and_the_held_out_set(tmp_path: Path) -> None:
    numeric, _ = demo_specs(EXAMPLE, steps=4, eval_size=8)
    spec = JobSpec.model_validate(numeric)
    assert (spec.train.steps, spec.train.eval_every, spec.data.eval_size) == (4, 2, 8)
    assert spec.train.warmup_steps < 4
    ce_only = tmp_path / "ce.yaml"
    ce_only.write_text(EXAMPLE.read_text().replace("name: smmd", "name: ce"))
    assert [s["loss"]["name"] for s in demo_specs(ce_only, None, None)] == ["ce"]


def test_metrics_table_puts_untrained_and_each_job_on_the_same_columns() -> None:
    before = {"exact_match": 0.0, "within_5pct": 0.01, "mae": 812.0,
              "median_rel_error": 0.97, "parse_failure_rate": 0.5}  # fmt: skip
    job = {"final_metrics": {"eval_exact_match": 0.515, "eval_mae": 3.25, "loss": 0.4}}
    text = render(metrics_table(before, [job], ["smmd (demo:1)"]))
    untrained = next(line for line in text.splitlines() if "untrained" in line)
    assert "0.0%" in untrained and "812" in untrained and "50.0%" in untrained
    trained = next(line for line in text.splitlines() if "smmd (demo:1)" in line)
    assert "51.5%" in trained and "3.25" in trained and "-" in trained  # not reported: "-"


def test_served_cell_shows_the_answer_its_spread_and_interval() -> None:
    cell = served_cell(
        {"text": " 205\n", "expected_value": 204.6, "std": 3.14, "interval": [200.0, 210.0]}
    )
    assert cell == "205  (E 204.6 ± 3.1, 90% in [200, 210])"
    assert served_cell({"text": "", "expected_value": None, "std": None}) == "(empty)"


def test_an_untrained_model_without_parseable_answers_shows_no_mae() -> None:
    before = {"exact_match": 0.0, "mae": math.nan, "parse_failure_rate": 1.0}
    untrained = next(line for line in render(metrics_table(before, [], [])).splitlines()
                     if "untrained" in line)  # fmt: skip
    assert "nan" not in untrained and "100.0%" in untrained


def test_next_steps_fill_in_the_model_and_align_their_comments() -> None:
    lines = next_steps("units", "http://127.0.0.1:8080").splitlines()
    assert any("--model units@production" in line for line in lines)
    assert lines[0].startswith("http://127.0.0.1:8080/ui ")  # the dashboard first
    assert "http://127.0.0.1:8080/openapi.json" in lines[-1]
    assert len({line.index("  # ") for line in lines if "  # " in line}) == 1


def test_a_bad_demo_spec_is_a_message_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("steps: 800", "steps: -5"))
    with pytest.raises(SystemExit) as stop:
        main(["--spec", str(bad)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--spec" in err and "train.steps" in err and "Traceback" not in err


def test_a_missing_demo_spec_is_a_message_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--spec", str(tmp_path / "absent.yaml")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--spec" in err and "absent.yaml" in err and "Traceback" not in err
