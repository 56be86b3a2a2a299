"""README.md's "Serving speed (measured)" section is rendered from the committed serving
benchmarks' JSON (bench/readme_serving.py), and its verdicts follow the figures."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest

from tests.support.bench import RESULTS, ROOT, load


@pytest.fixture(scope="module")
def renderer() -> ModuleType:
    return load("readme_serving")


def committed(name: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((RESULTS / name).read_text())
    return result


def test_readme_section_is_the_rendered_benchmarks(renderer: ModuleType) -> None:
    rendered = renderer.render(committed("sample_one_pass.json"), committed("serve_load-vllm.json"))
    in_readme = renderer.section_of((ROOT / "README.md").read_text(), renderer.HEADING)
    assert in_readme == rendered, "README.md's section differs: run bench/readme_serving.py --write"
    for png in ("sample_one_pass.png", "serve_load-vllm.png"):
        assert f"(bench/results/{png})" in rendered and (RESULTS / png).stat().st_size > 0


def test_the_http_run_holds_both_engines_at_both_levels_with_the_load(renderer: ModuleType) -> None:
    result = committed("serve_load-vllm.json")
    cells = {(r["engine"].split("[")[0], r["samples"], r["concurrency"]) for r in result["rows"]}
    for engine in ("numtune", "vllm"):
        assert {(engine, k, c) for k in (0, 1, 16) for c in (1, 16)} <= cells
    assert all(len(r["load_1m"]) == 2 for r in result["rows"]) and result["beside"]
    assert result["request"]["max_new_tokens"] == 8


def rows(numtune: dict[tuple[int, int], tuple[float, float]]) -> list[dict[str, Any]]:
    """serve_load rows: numtune's (rps, p50 ms) per (K, clients) as given, vLLM's 10 rps, 100 ms."""
    out = []
    for (k, c), (rps, p50) in numtune.items():
        for engine, (r, p) in (("numtune[auto]", (rps, p50)), ("vllm", (10.0, 100.0))):
            out.append({"engine": engine, "samples": k, "concurrency": c, "batching": True,
                        "rps": r, "p50_ms": p, "load_1m": [1.0, 2.0]})  # fmt: skip
    return out


def test_ratios_and_verdicts_follow_the_figures(renderer: ModuleType) -> None:
    run = {"rows": rows({(0, 16): (8.0, 900.0), (0, 1): (2.0, 500.0), (1, 1): (1.0, 400.0),
                         (16, 1): (1.0, 800.0)}), "request": {"max_new_tokens": 8}}  # fmt: skip
    f = renderer.http_figures(run)
    assert f["rps_vs_vllm"] == pytest.approx(0.8) and f["numtune_p50_s"] == pytest.approx(0.5)
    assert f["numtune_k16_over_k1"] == pytest.approx(2.0) and f["top"] == 16
    text = "\n".join(renderer.http_lines(run))
    assert "≥ 0.7×: met" in text and "≤ 0.6 s: met" in text and "≤ 1.5×: missed" in text
