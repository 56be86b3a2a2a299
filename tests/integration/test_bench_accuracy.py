"""bench/accuracy.py end to end at a minimal size (so it cannot rot), and its report's
Holm families (the statistics themselves: tests/unit/test_stats_bench.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.ray
@pytest.mark.slow
def test_minimal_study_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "results"
    argv = [
        *("--part", "multidigit", "--seeds", "2", "--steps", "4", "--eval-size", "16"),
        *("--train-size", "128", "--losses", "ce,emd,smmd_tuned", "--tune-samples", "1"),
        *("--tune-val-size", "8", "--out", str(out), "--storage", str(tmp_path / "storage")),
    ]
    done = subprocess.run(
        [sys.executable, str(BENCH / "accuracy.py"), *argv],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "min on 2 idle cores" in done.stdout  # the estimate is printed before training

    text = (out / "accuracy-small.json").read_text()
    assert "NaN" not in text  # strict JSON: undefined statistics are null
    result = json.loads(text)
    runs = result["runs"]
    assert sorted((r["model"], r["loss"], r["seed"]) for r in runs) == sorted(
        ("char3", loss, seed) for loss in ("ce", "emd", "smmd_tuned") for seed in (0, 1)
    )
    for run in runs:
        # Multi-digit number tokens (char3): the same weights are also scored with plain greedy.
        splits = {"interpolate", "extrapolate", "interpolate@greedy", "extrapolate@greedy"}
        assert set(run["metrics"]) == splits
        for scores in run["metrics"].values():
            for key in ("exact_match", "within_1pct", "within_5pct", "digit_accuracy"):
                assert 0.0 <= scores[key] <= 1.0
        assert [p["step"] for p in run["curve"]] == [1, 2, 3, 4]  # steps // evals = 1 → every step
        # The answers behind each split's scores, and what produced them.
        assert set(run["predictions"]) == set(run["targets"]) == set(run["decoding"]) == splits
        assert all(len(answers) == 16 for answers in run["predictions"].values())
        assert run["commit"] and run["decoding"]["interpolate"]["max_new_tokens"] >= 1
        assert run["step_time_s"] > 0
        # Issue 33: each run's final weights calibrated as a version's are; its 90 % interval
        # measured out of sample, on the scored split (16 questions: 4 folds fit on 12 each,
        # the fewest that give a 90 % conformal quantile).
        assert 0.0 <= run["metrics"]["interpolate"]["interval_coverage_90"] <= 1.0
        assert run["metrics"]["interpolate"]["interval_width_90"] >= 0.0
        assert "interval_coverage_90" not in run["metrics"]["extrapolate"]
    # The sweep's best config is what the tuned rows trained with.
    config = result["tuned"]["char3/listsum"]["config"]
    assert set(config) == {"bandwidth", "weight"}
    tuned_spec = json.loads(
        next(
            (tmp_path / "storage" / "runs").glob("char3-listsum-smmd_tuned-s0-*/spec.json")
        ).read_text()
    )
    assert tuned_spec["loss"]["bandwidth"] == config["bandwidth"]

    rows = {(r["model"], r["split"], r["loss"]): r for r in result["summary"]}
    assert len(rows) == 12  # char3: 2 splits × 2 decodings; × 3 losses
    emd = rows[("char3", "interpolate", "emd")]
    assert emd["vs_ce"]["exact_match"]["n"] == 2 and "p_holm" in emd["vs_ce"]["exact_match"]
    assert "p_bh" in emd["vs_ce"]["mae"]  # secondary: Benjamini-Hochberg over the table
    # Every run kept its answers: the bootstrap over questions x seeds has them.
    assert emd["vs_ce"]["exact_match"]["ci_boot_low"] is not None
    assert "vs_ce" not in rows[("char3", "interpolate", "ce")]
    # Per arm, its intervals; their width and score are secondary tests (BH) against ce.
    for loss in ("ce", "emd", "smmd_tuned"):
        shown = rows[("char3", "interpolate", loss)]["intervals"]
        assert shown["runs"] == 2 and shown["level"] == 0.9, shown
    assert "p_bh" in emd["vs_ce"]["interval_width_90"]
    assert "intervals" not in rows[("char3", "extrapolate", "emd")]
    md = (out / "accuracy-small.md").read_text()
    assert "## listsum (extrapolate), char3 model" in md and "## Verdicts" in md
    assert "## listsum (interpolate, plain greedy decoding), char3 model" in md
    assert md.count("90 % intervals, calibrated as a version's are") == 1
    assert f"{result['machine']['cores']} cores" in md and result["commit"][:7] in md
    assert (out / "accuracy-small.png").stat().st_size > 5000
    assert (out / "accuracy-small-curves.png").stat().st_size > 5000

    # Rendering again from the saved runs (no training) gives the same figures, and every
    # cell lists the losses in one order.
    again = tmp_path / "again"
    render = [sys.executable, str(BENCH / "accuracy.py"), "--out", str(again)]
    done = subprocess.run(
        [*render, "--render", str(out / "accuracy-small.json")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    rendered = json.loads((again / "accuracy-small.json").read_text())
    for key in ("runs", "summary", "commit", "invocations"):
        assert json.dumps(rendered[key]) == json.dumps(result[key])
    for cell in {(r["model"], r["split"]) for r in rendered["summary"]}:
        order = [r["loss"] for r in rendered["summary"] if (r["model"], r["split"]) == cell]
        assert order == ["ce", "emd", "smmd_tuned"]
    assert "rendered again from its runs" in (again / "accuracy-small.md").read_text()
    missing = subprocess.run(
        [*render, "--render", str(tmp_path / "nope.json")], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "--render" in missing.stderr
    bad_part = subprocess.run([*render, "--part", "nope"], capture_output=True, text=True)
    assert bad_part.returncode == 2 and "--part" in bad_part.stderr


def test_a_tuning_split_smaller_than_a_batch_names_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    runs = load("accuracy_runs")
    from jobs.spec import JobSpec

    spec = JobSpec.model_validate(
        {
            "name": "split",
            "model": {"source": "random:tiny-char"},
            "data": {"task": "listsum", "train_size": 64, "eval_size": 4},
            "train": {"steps": 1, "batch_size": 64},
        }
    )
    with pytest.raises(runs.StudyError, match=r"--tune-val-size 8 leaves 56 of 64 .* --train-size"):
        runs.write_validation_split(spec, tmp_path, 8)
    smaller = spec.model_copy(update={"train": spec.train.model_copy(update={"batch_size": 32})})
    train, val, n_train = runs.write_validation_split(smaller, tmp_path, 8)
    assert n_train == 56
    assert [len(p.read_text().splitlines()) for p in (train, val)] == [56, 8]


def test_holm_family_is_every_primary_test_of_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    report = load("accuracy_report")

    def run(task: str, loss: str, seed: int, em: float) -> dict[str, Any]:
        metrics = {"exact_match": em, "mae": 1 - em}
        return {"model": "m", "task": task, "loss": loss, "seed": seed, "step_time_s": 1.0,
                "metrics": {"interpolate": metrics, "extrapolate": metrics}}  # fmt: skip

    def em(gain: float, seed: int, k: int) -> float:  # k: each loss its own noise
        return 0.3 + gain + 0.01 * seed * seed + 0.02 * ((seed * k) % 3)

    gains = {"ce": 0.0, "emd": 0.1, "ntil": 0.12}
    main = [run(task, loss, s, em(gain + shift, s, k)) for task, shift in (("a", 0), ("b", 0.03))
            for k, (loss, gain) in enumerate(gains.items(), 1) for s in range(5)]  # fmt: skip
    # Noise factors ≡ 0 (mod 3): a factor ≡ 1 would repeat ce's noise, and the same
    # difference on every seed has no variance, so no test.
    variants = [run("a", f"emd[weight={w}]", s, em(0.05 * k, s, 3 * k + 3))
                for k, w in enumerate((0.1, 1, 3)) for s in range(5)]  # fmt: skip

    def tests(runs: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
        rows = report.summarise(runs, "small")
        return {(r["task"], r["split"], r["loss"]): r["vs_ce"] for r in rows if "vs_ce" in r}

    alone, together = tests(main), tests(main + variants)
    primary = sorted(k for k in together if k[1] == "interpolate" and "[" not in k[2])
    assert len(primary) == 4  # 2 losses x 2 tasks: one family across the cells
    raw = [together[k]["exact_match"]["p"] for k in primary]
    # Step-down Holm by hand over the four.
    order = sorted(range(4), key=lambda i: raw[i])
    expected, running = [0.0] * 4, 0.0
    for j, i in enumerate(order):
        running = max(running, min(1.0, (4 - j) * raw[i]))
        expected[i] = running
    assert [together[k]["exact_match"]["p_holm"] for k in primary] == pytest.approx(expected)
    # The λ variants and the extrapolation split are secondary: BH, never in Holm's family.
    for key in primary:
        assert together[key]["exact_match"]["p_holm"] == alone[key]["exact_match"]["p_holm"]
    for key, vs_ce in together.items():
        if key not in primary:
            assert "p_holm" not in vs_ce["exact_match"] and "p_bh" in vs_ce["exact_match"]
        assert "p_holm" not in vs_ce["mae"] and "p_bh" in vs_ce["mae"]
    rows = [
        r
        for r in report.summarise(main, "small")
        if r["loss"] == "emd" and r["split"] == "interpolate"
    ]
    assert len(rows) == 2 and all(r["verdict"].startswith("`emd`: ") for r in rows)  # 2 tasks


def test_report_bootstraps_the_runs_that_kept_their_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    report = load("accuracy_report")
    targets = [str(10 + q) for q in range(20)]

    def run(loss: str, seed: int, right: int, answers: bool) -> dict[str, Any]:
        # The first `right` questions answered exactly, the others off by one.
        preds = [t if q < right else str(int(t) + 1) for q, t in enumerate(targets)]
        metrics = {"exact_match": right / 20, "mae": (20 - right) / 20}
        kept = {"predictions": {"interpolate": preds}, "targets": {"interpolate": targets}}
        return {"model": "m", "task": "t", "loss": loss, "seed": seed, "step_time_s": 1.0,
                "metrics": {"interpolate": metrics}, **(kept if answers else {})}  # fmt: skip

    runs = [run("ce", s, 5 + s, True) for s in range(4)]
    runs += [run("emd", s, 12 + s % 2, True) for s in range(4)]
    result = {"scale": "t", "parts": ["t"], "command": "c", "commit": "x", "finished": "now",
              "machine": {"cores": 2, "ram_gib": 1, "cpu": "c", "python": "3"}}  # fmt: skip
    rows = report.summarise(runs, "small")
    test = next(r for r in rows if r["loss"] == "emd")["vs_ce"]["exact_match"]
    # emd answers 12-13 of 20 right, ce 5-8: the bootstrap interval holds the mean gain
    # and excludes 0.
    assert test["ci_boot_low"] < test["mean_diff"] < test["ci_boot_high"]
    assert 0 < test["p_boot"] < 0.05
    md = report.markdown({**result, "summary": rows})
    assert "⟨" in md and "bootstrap interval over questions × seeds" in md
    bare = [{k: v for k, v in r.items() if k not in ("predictions", "targets")} for r in runs]
    md = report.markdown({**result, "summary": report.summarise(bare, "small")})
    assert "⟨" not in md and "Bootstrap over questions × seeds: absent" in md


def test_every_planned_run_id_is_a_valid_job_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    switches = ("RAY_AUTH_MODE", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    before = {key: os.environ.get(key) for key in switches}
    accuracy = load("accuracy")
    # Importing the script leaves Ray's switches alone: its own (the token, loopback) once
    # reached the suite's shared Ray and broke every test after it.
    assert {key: os.environ.get(key) for key in switches} == before
    plan_module = load("accuracy_plan")
    from jobs.records.run_files import JOB_ID

    labels = {label for part in plan_module.PARTS["small"].values() for label in part.losses}
    assert any("=" in label for label in labels)  # the λ and before/after variants
    for label in labels:
        run = accuracy.run_id("char3", "listsum", label, 4, "0724d5c8")
        assert JOB_ID.match(run), run
