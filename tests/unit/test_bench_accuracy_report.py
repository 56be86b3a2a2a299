"""The accuracy report's Holm families and bootstrap (bench/accuracy_report.py, the reader of
the kept runs; the statistics themselves: tests/unit/test_stats_bench.py)."""

from __future__ import annotations

from typing import Any

import pytest

from bench import accuracy_report as report


def test_holm_family_is_every_primary_test_of_the_table() -> None:

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
    assert all(r["verdict"].startswith("`emd`: ") for r in rows)


def test_report_bootstraps_the_runs_that_kept_their_answers() -> None:
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
