"""README's pretrained rows (bench/readme_pretrained.py) follow bench/protocol.md: only tasks
with every arm at every seed count, Holm runs over every arm × complete task together, and a
task where ce was still improving is also tested at step 120. Synthetic records, shaped as
the first protocol's runner wrote them (bench/results/pretrained-runs/)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from bench import readme_pretrained

ARMS = ("ce", "emd", "smmd_tuned", "del[weight=1]")


@pytest.fixture(scope="module")
def pre() -> ModuleType:
    return readme_pretrained


def record(task: str, loss: str, seed: int, em: float, climb: float = 0.0) -> dict[str, Any]:
    """A finished run: its final scores, a 5-point curve ending at `em` (rising by `climb`
    over the last 30 steps), 20 kept answers with round(20 · em) right."""
    right = round(20 * em)
    targets = [str(100 + q) for q in range(20)]
    preds = [t if q < right else str(int(t) + 7) for q, t in enumerate(targets)]
    curve = [{"step": s, "exact_match": em - climb * (150 - s) / 30, "mae": 1.0,
              "within_5pct": 0.5, "digit_accuracy": 0.5, "parse_failure_rate": 0.0}
             for s in (30, 60, 90, 120, 150)]  # fmt: skip
    scores = {"exact_match": em, "mae": 7 * (1 - em), "within_5pct": 1.0, "median_rel_error": 0.0}
    return {"model": "smollm2", "task": task, "loss": loss, "seed": seed, "step_time_s": 2.0,
            "wall_s": 600.0, "commit": "abcdef1234567", "curve": curve,
            "decoding": {"interpolate": {"number_first": True}},
            "metrics": {"interpolate": scores}, "predictions": {"interpolate": preds},
            "targets": {"interpolate": targets}}  # fmt: skip


def study(gain: dict[str, float], climb: float = 0.0, seeds: int = 5) -> list[dict[str, Any]]:
    runs = []
    for task in ("units", "jsonl"):
        for k, loss in enumerate(ARMS):
            for s in range(seeds):
                em = 0.4 + gain.get(loss, 0.0) + 0.03 * ((s * (k + 1) + k) % 4)
                runs.append(record(task, loss, s, em, climb if loss == "ce" else 0.0))
    return runs


SWEEPS = [
    {"sweep": "lr", "task": t, "config": {"lr": 9.2e-5}, "metrics": {"eval_exact_match": 0.55}}
    for t in ("units", "jsonl")
]


def test_an_incomplete_study_shows_only_its_progress(pre: ModuleType) -> None:
    runs = [r for r in study({}) if not (r["loss"] == "emd" and r["seed"] == 4)]
    assert pre.complete_tasks(runs) == []
    lines = pre.render(runs, SWEEPS)
    assert f"{len(runs)} of its 40 runs have finished" in "\n".join(lines)
    assert not any(line.startswith("|") for line in lines)


def test_holm_runs_over_every_arm_of_every_complete_task(pre: ModuleType) -> None:
    runs = study({"emd": 0.2})
    assert pre.complete_tasks(runs) == ["units", "jsonl"]
    summary = pre.summarise(runs, "pretrained")
    family = [r for r in summary if "verdict" in r]
    assert len(family) == 6  # 3 arms x 2 tasks
    raw = sorted(r["vs_ce"]["exact_match"]["p"] for r in family)
    # Step-down Holm by hand over the six.
    running, expected = 0.0, []
    for rank, p in enumerate(raw):
        running = max(running, min(1.0, (6 - rank) * p))
        expected.append(running)
    got = sorted(r["vs_ce"]["exact_match"]["p_holm"] for r in family)
    assert got == pytest.approx(expected)
    text = "\n".join(pre.render(runs, SWEEPS))
    assert "of the 6 primary tests" in text
    assert all(r["vs_ce"]["exact_match"]["margin"] == 0.05 for r in family)  # the protocol's


def test_a_task_missing_a_seed_is_left_out_of_the_family(pre: ModuleType) -> None:
    runs = [r for r in study({"emd": 0.2}) if (r["task"], r["seed"]) != ("jsonl", 4)]
    assert pre.complete_tasks(runs) == ["units"]
    text = "\n".join(pre.render(runs, SWEEPS))
    assert "of the 3 primary tests" in text or "None of the 3 primary tests" in text
    assert "Not complete yet, so not in the table: word problems (JSONL) (16 of 20 runs)" in text
    # A protocol cell with no run yet is named too: the family will still grow.
    units_only = [r for r in runs if r["task"] == "units"]
    text = "\n".join(pre.render(units_only, SWEEPS))
    assert "Not complete yet, so not in the table: word problems (JSONL) (0 of 20 runs)" in text


def test_a_climbing_ce_is_also_tested_at_step_120(pre: ModuleType) -> None:
    level = "\n".join(pre.render(study({"emd": 0.1}), SWEEPS))
    assert "`ce` had levelled off on unit conversions" in level
    climbing = "\n".join(pre.render(study({"emd": 0.1}, climb=0.05), SWEEPS))
    assert "`ce` was still improving on unit conversions" in climbing
    assert "also reported at step 120 (Holm over the 6 tests at that budget)" in climbing


def test_a_significant_harm_reads_as_worse_never_as_surviving_help(pre: ModuleType) -> None:
    runs = study({"emd": -0.2})
    family = [r for r in pre.summarise(runs, "pretrained") if "verdict" in r]
    harms = [r for r in family if r["loss"] == "emd"]
    assert len(harms) == 2 and all(r["vs_ce"]["exact_match"]["p_holm"] < 0.05 for r in harms)
    text = "\n".join(pre.render(runs, SWEEPS))
    head = text.split("\n\n")[1]
    assert "survive: worse than `ce`: `emd` on unit conversions, `emd` on word problems" in head
    assert "better than `ce`" not in head
    assert all(r["verdict"].endswith("— worse than `ce`") for r in harms)
    assert "** worse |" in text  # the table marks the harm beside its bold cell


def test_a_gain_is_not_recommended_while_ce_still_rises(pre: ModuleType) -> None:
    runs = study({"emd": 0.2}, climb=0.05)
    rows = pre.summarise(runs, "pretrained")
    emd = [r for r in rows if r.get("loss") == "emd" and "verdict" in r]
    assert emd and all("recommended" not in r["verdict"] for r in emd)
    assert all("better than `ce` at 150 steps; `ce` still rising" in r["verdict"] for r in emd)
    level = [r for r in pre.summarise(study({"emd": 0.2}), "pretrained") if "verdict" in r]
    assert any(r["verdict"].endswith("— recommended") for r in level if r["loss"] == "emd")
