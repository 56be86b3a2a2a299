"""The job's plumbing without Ray workers: storage paths, sweep sizing (failure codes:
tests/unit/test_failure_codes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray import tune

from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec, SearchDim, TuneSpec
from jobs.storage.uri import join_uri
from jobs.train.loop import total_steps
from jobs.tune.sweep import SweepDoesNotFitError, concurrency, to_tune


def test_run_files_round_trip_and_atomic_names(tmp_path: Path) -> None:
    files = RunFiles.for_job("job-1", str(tmp_path))
    assert files.read_json("result.json") is None
    files.write_json("result.json", {"status": "succeeded"})
    assert files.read_json("result.json") == {"status": "succeeded"}
    assert (tmp_path / "runs" / "job-1" / "result.json").exists()
    assert not list((tmp_path / "runs" / "job-1").glob(".*.tmp"))


@pytest.mark.parametrize("bad", ["../escape", "a/b", "", ".hidden", "x" * 200, "a..b"])
def test_run_files_refuse_ids_that_are_not_plain_names(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="job id"):
        RunFiles.for_job(bad, str(tmp_path))
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_epochs_become_steps_over_all_workers() -> None:
    spec = JobSpec.model_validate(
        {"name": "j", "train": {"epochs": 2, "batch_size": 8, "grad_accum": 2}}
    )
    # 2 epochs × 1000 rows / (8 per micro-batch × 2 micro-batches × 2 workers) = 62.5 → 63
    assert total_steps(spec, 1000, world=2) == 63
    fixed = JobSpec.model_validate({"name": "j", "train": {"steps": 7}})
    assert total_steps(fixed, 1000, world=4) == 7


def _sweep(workers: int, cpus: float, max_concurrent: int | None = None) -> TuneSpec:
    return TuneSpec.model_validate(
        {
            "name": "s",
            "base": {
                "name": "b",
                "train": {"eval_every": 2},
                "scaling": {"num_workers": workers, "cpus_per_worker": cpus},
            },
            "space": {"bandwidth": {"kind": "loguniform", "low": 0.5, "high": 8}},
            "max_concurrent_trials": max_concurrent,
        }
    )


def test_concurrency_counts_driver_and_workers() -> None:
    assert concurrency(_sweep(1, 0.99), {"CPU": 2}) == 2  # 1.00 CPU per trial
    assert concurrency(_sweep(1, 1.0), {"CPU": 2}) == 1  # 1.01 CPU per trial
    assert concurrency(_sweep(1, 0.49), {"CPU": 2}) == 4
    assert concurrency(_sweep(1, 0.49, max_concurrent=3), {"CPU": 2}) == 3


def test_a_sweep_starts_no_more_trials_than_fit_what_is_free() -> None:
    # Started by the service once one trial fits: a trial beyond the free CPUs would wait
    # for its workers until Ray Train's worker-group timeout failed it.
    assert concurrency(_sweep(1, 0.99), {"CPU": 4}, {"CPU": 2.5}) == 2
    assert concurrency(_sweep(1, 0.99), {"CPU": 4}, {"CPU": 0.5}) == 1  # at least one
    assert concurrency(_sweep(1, 0.99, max_concurrent=1), {"CPU": 4}, {"CPU": 4}) == 1


def test_concurrency_says_what_fits_when_nothing_does() -> None:
    with pytest.raises(SweepDoesNotFitError) as info:
        concurrency(_sweep(2, 2.0), {"CPU": 2})
    message = str(info.value)
    assert "needs 4.01 CPUs" in message and "has 2 CPUs" in message
    assert "cpus_per_worker <= 0.99" in message  # (2 - 0.01) / 2, rounded down


def test_gpu_trials_need_gpus() -> None:
    spec = _sweep(1, 1.0).model_copy(
        update={"base": JobSpec.model_validate({"name": "b", "scaling": {"use_gpu": True}})}
    )
    with pytest.raises(SweepDoesNotFitError, match="1 GPUs"):
        concurrency(spec, {"CPU": 8})


def test_search_dimensions_map_to_tune_domains() -> None:
    log = to_tune(SearchDim(kind="loguniform", low=0.25, high=16))
    assert isinstance(log, tune.search.sample.Float)
    assert (log.lower, log.upper) == (0.25, 16)
    grid = to_tune(SearchDim(kind="grid", values=(1.0, 2.0)))
    assert grid == {"grid_search": [1.0, 2.0]}
    choice = to_tune(SearchDim(kind="choice", values=("emd", "smmd")))
    assert choice.categories == ["emd", "smmd"]


@pytest.mark.parametrize(
    ("base", "parts", "joined"),
    [
        ("/data/store", ("runs", "j"), "/data/store/runs/j"),
        ("/data/store/", ("runs",), "/data/store/runs"),
        (
            "s3://b/p?endpoint_override=127.0.0.1:9&scheme=http",
            ("runs", "j"),
            "s3://b/p/runs/j?endpoint_override=127.0.0.1:9&scheme=http",
        ),
    ],
)
def test_uri_parts_go_before_options(base: str, parts: tuple[str, ...], joined: str) -> None:
    assert join_uri(base, *parts) == joined


def test_paths_inside_a_filesystem_become_uris(tmp_path: Path) -> None:
    local = RunFiles.for_job("j", str(tmp_path))
    assert local.to_uri(f"{tmp_path}/runs/j/x") == f"{tmp_path}/runs/j/x"
    remote = RunFiles(local.fs, "b/p/runs/j", "s3://b/p/runs/j?scheme=http")
    assert remote.to_uri("b/p/runs/j/train/c1") == "s3://b/p/runs/j/train/c1?scheme=http"
