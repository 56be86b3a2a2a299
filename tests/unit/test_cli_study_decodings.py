"""`numtune study show` names the decoding each arm is judged by, where the study declared
one (service/cli/studies.py decoding_lines), from the result's `decodings`."""

from __future__ import annotations

from service.cli.studies import decoding_lines

CHOSEN = {
    "ce": {"decoding": "median", "declared": "best_on_validation", "metric": "mae",
           "validation": {"number_first": 412.5, "expected": 398.0, "median": 391.25}, "runs": 3},
    "emd": {"decoding": "greedy", "declared": "greedy", "metric": None, "validation": {},
            "runs": 0},
    "smmd": {"decoding": "number_first", "declared": None, "validation": {}, "runs": 0},
}  # fmt: skip


def test_each_declared_arm_gets_a_line_with_what_its_choice_rested_on() -> None:
    lines = decoding_lines(CHOSEN)
    assert lines == [
        "- ce: judged by its median answers (best mae on validation rows: number_first 412.5, "
        "expected 398, median 391.2)",
        "- emd: judged by its greedy answers",
    ]  # smmd declared nothing: the base's decoding, as before, and no line
