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
    http = committed("serve_load-vllm-engine.json")
    rendered = renderer.render(committed("sample_one_pass.json"), http)
    in_readme = renderer.section_of((ROOT / "README.md").read_text(), renderer.HEADING)
    assert in_readme == rendered, "README.md's section differs: run bench/readme_serving.py --write"
    for png in ("sample_one_pass.png", "serve_load-vllm-engine.png"):
        assert f"(bench/results/{png})" in rendered and (RESULTS / png).stat().st_size > 0


def test_the_http_run_holds_every_engine_at_both_levels_with_the_load(
    renderer: ModuleType,
) -> None:
    result = committed("serve_load-vllm-engine.json")
    cells = {(r["engine"].split("[")[0], r["samples"], r["concurrency"]) for r in result["rows"]}
    for engine in ("numtune", "numtune+vllm", "vllm"):
        assert {(engine, k, c) for k in (0, 1, 16) for c in (1, 16)} <= cells
    assert all(len(r["load_1m"]) == 2 for r in result["rows"]) and result["beside"]
    assert result["request"]["max_new_tokens"] == 8


def rows(
    numtune: str, figures: dict[tuple[int, int], tuple[float, float]], vllm_rps: float
) -> list[dict[str, Any]]:
    """serve_load rows of one deploy: numtune's (rps, p50 ms) per (K, clients) as given,
    bare vLLM's `vllm_rps` and 100 ms beside them."""
    out = []
    for (k, c), (rps, p50) in figures.items():
        for engine, (r, p) in ((numtune, (rps, p50)), ("vllm", (vllm_rps, 100.0))):
            out.append({"engine": engine, "samples": k, "concurrency": c, "batching": True,
                        "phase": numtune, "rps": r, "p50_ms": p,
                        "load_1m": [1.0, 2.0]})  # fmt: skip
    return out


def test_ratios_and_verdicts_follow_the_figures(renderer: ModuleType) -> None:
    hf = {(0, 16): (4.0, 900.0), (0, 1): (2.0, 900.0), (1, 1): (1.0, 400.0), (16, 1): (1.0, 500.0)}
    on = {(0, 16): (8.0, 90.0), (0, 1): (2.0, 500.0), (1, 1): (1.0, 400.0), (16, 1): (1.0, 800.0)}
    run = {"rows": rows("numtune[auto]", hf, 20.0) + rows("numtune+vllm[auto]", on, 10.0),
           "request": {"max_new_tokens": 8}}  # fmt: skip
    f = renderer.http_figures(run, "numtune+vllm[auto]")  # beside its own deploy's vLLM
    assert f["rps_vs_vllm"] == pytest.approx(0.8) and f["numtune_p50_s"] == pytest.approx(0.5)
    assert f["numtune_k16_over_k1"] == pytest.approx(2.0) and f["top"] == 16
    assert renderer.http_figures(run, "numtune[auto]")["rps_vs_vllm"] == pytest.approx(0.2)
    text = "\n".join(renderer.http_lines(run))
    assert "≥ 0.7×: met" in text and "≤ 0.6 s: met" in text and "≤ 1.5×: missed" in text
    assert "2.0× the requests/s it answers on `generate()`" in text
