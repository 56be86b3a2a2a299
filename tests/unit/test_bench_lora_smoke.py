"""bench/lora.py's code paths at a tiny size, so they cannot rot."""

from __future__ import annotations

from pathlib import Path

from tests.support.bench import load


def test_lora_bench_rows_run_on_a_tiny_model(tmp_path: Path) -> None:
    bench = load("lora")
    row = bench.train_row(bench.make_spec("random:tiny-digit", adapter=True, steps=3, batch=2), 1)
    assert row["adapter"] and row["fused"] and 0 < row["trainable_params"] < 10_000
    sizes = bench.bytes_rows("random:tiny-digit", tmp_path)
    assert sizes["adapter_weights_fraction"] < 0.05
    serving = bench.serving_rows("random:tiny-digit", tmp_path, requests=4)
    assert serving["bases_loaded"] == 1 and serving["switch_median_s"] < 1.0
    assert serving["adapters_params_mb"] < serving["full_models_params_mb"]
