"""Issue 16: the end-of-job hook calibrates a checkpoint on the job's held-out split, and
registration carries the record onto the version; without it the version has none."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pyarrow.fs as pafs

from jobs.calibrate import calibrate_checkpoint
from jobs.calibration_record import CALIBRATION_FILE, Calibration
from jobs.spec import JobSpec
from service.settings import Settings

BENCH = Path(__file__).resolve().parents[2] / "bench" / "serve_setup.py"


def serve_load():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_serve_setup", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def job(questions: int) -> JobSpec:
    return JobSpec.model_validate({
        "name": "cal", "data": {"task": "add", "train_size": 50, "eval_size": 12},
        "calibration": {"questions": questions, "samples": 3, "max_new_tokens": 3},
    })  # fmt: skip


def test_registration_carries_the_jobs_calibration(tmp_path: Path) -> None:
    bench = serve_load()
    settings = Settings(home=tmp_path, dev=True)

    def calibrated(folder: Path) -> Path:
        bench.digit_writer(folder)
        assert calibrate_checkpoint(job(10), pafs.LocalFileSystem(), str(folder))
        assert (folder / CALIBRATION_FILE).is_file()
        return folder

    version = bench.register_checkpoint(settings, name="cal", owner="a", build=calibrated)
    record = Calibration.model_validate(version.metrics["calibration"])
    assert (record.n, record.samples, record.source) == (10, 3, "held-out split of the job")
    assert [r.level for r in record.levels] == [0.5, 0.8, 0.9, 0.95]
    assert CALIBRATION_FILE in version.files  # hashed with the weights it describes

    plain = bench.register_checkpoint(settings, name="plain", owner="a")
    assert "calibration" not in plain.metrics


def test_questions_zero_turns_the_hook_off(tmp_path: Path) -> None:
    serve_load().digit_writer(tmp_path / "ckpt")
    assert not calibrate_checkpoint(job(0), pafs.LocalFileSystem(), str(tmp_path / "ckpt"))
    assert not (tmp_path / "ckpt" / CALIBRATION_FILE).exists()
