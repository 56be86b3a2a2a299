"""Issue 16: the end-of-job hook calibrates a checkpoint on the job's held-out split, and
registration carries the record onto the version; without it the version has none.
Issue 33: the bench computes the same record; an old-layout record in SQL still reads."""

from __future__ import annotations

from pathlib import Path

import pyarrow.fs as pafs
import pytest

from jobs.calibration.held_out import calibrate_checkpoint
from jobs.calibration.record import (
    CALIBRATION_FILE,
    QUESTIONS_FILE,
    Calibration,
    QuestionCalibration,
)
from jobs.data import load_task
from jobs.infer import NumericPredictor
from jobs.spec import JobSpec
from service.registry import Registry
from service.settings import Settings
from service.store import Database
from tests.support import serving
from tests.support.bench import load
from tests.support.calibration import OLD


def job(questions: int) -> JobSpec:
    return JobSpec.model_validate({
        "name": "cal", "data": {"task": "add", "train_size": 50, "eval_size": 12},
        "calibration": {"questions": questions, "samples": 3, "max_new_tokens": 3},
    })  # fmt: skip


def test_registration_carries_the_jobs_calibration(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, dev=True)

    def calibrated(folder: Path) -> Path:
        serving.digit_writer(folder)
        assert calibrate_checkpoint(job(10), pafs.LocalFileSystem(), str(folder))
        assert (folder / CALIBRATION_FILE).is_file()
        return folder

    version = serving.register_checkpoint(settings, name="cal", owner="a", build=calibrated)
    record = version.calibration
    assert record is not None and record.layout == 2
    assert (record.n, record.samples, record.source) == (10, 3, "held-out split of the job")
    assert [r.level for r in record.levels] == [0.5, 0.8, 0.9, 0.95]
    assert CALIBRATION_FILE in version.files  # hashed with the weights it describes

    plain = serving.register_checkpoint(settings, name="plain", owner="a")
    assert plain.calibration is None


def test_questions_zero_turns_the_hook_off(tmp_path: Path) -> None:
    serving.digit_writer(tmp_path / "ckpt")
    assert not calibrate_checkpoint(job(0), pafs.LocalFileSystem(), str(tmp_path / "ckpt"))
    assert not (tmp_path / "ckpt" / CALIBRATION_FILE).exists()


def test_the_bench_and_a_versions_record_agree_on_the_same_questions(tmp_path: Path) -> None:
    """Issue 33: bench/calibration.py's figures come from the function a version's record
    comes from, so on the same checkpoint and questions they are the same figures."""
    folder = tmp_path / "ckpt"
    serving.digit_writer(folder)
    assert calibrate_checkpoint(job(10), pafs.LocalFileSystem(), str(folder))
    stored = Calibration.model_validate_json((folder / CALIBRATION_FILE).read_text())
    rows = load_task(job(10).data).eval[:10]
    predictor = NumericPredictor.from_checkpoint(folder)
    bench = load("calibration").record_of(predictor, rows, samples=3, max_new_tokens=3)
    assert (bench.n, bench.method, bench.estimators) == (stored.n, stored.method, stored.estimators)
    by_level = {r.level: r for r in bench.levels}
    assert [by_level[r.level] for r in stored.levels] == stored.levels  # 50, 80, 90, 95 %
    assert any(r.calibrated is not None for r in stored.levels)  # something was measured
    # Beside it, each question's figures (a study's per-question interval score and CRPS):
    # the same calibrated intervals, so their scores' mean is the record's.
    lines = (folder / QUESTIONS_FILE).read_text().splitlines()
    figures = [QuestionCalibration.model_validate_json(line) for line in lines]
    assert len(figures) == stored.n and all(len(f.samples) <= 3 for f in figures)
    [ninety] = [r for r in stored.levels if r.level == 0.9]
    scores = [f.interval_score_90 for f in figures if f.interval_score_90 is not None]
    if ninety.calibrated is None:  # 10 questions: too few for 90 % out of sample
        assert scores == [] and all(f.interval_90 is None for f in figures)
    else:
        assert sum(scores) / len(scores) == pytest.approx(ninety.calibrated.winkler_mean)
    assert all(f.crps is not None for f in figures if f.samples)


def test_an_old_layout_record_in_the_registry_reads_as_the_new(tmp_path: Path) -> None:
    """A version calibrated before issue 33 keeps its record in the old layout in SQL; the
    registry shows it typed, its t kept and its coverage marked in-sample."""
    settings = Settings(home=tmp_path, dev=True)
    version = serving.register_checkpoint(settings, name="old", owner="a")
    registry = Registry(Database(settings.database_url), settings.storage_root, tmp_path / "c")
    assert registry.store.set_calibration(version.name, version.version, OLD)
    shown = registry.resolve("old:1")
    assert shown.calibration is not None and shown.calibration.layout == 1
    assert shown.calibration.levels[1].nested_parameter == 19.0
    assert shown.calibration.levels[1].margin == pytest.approx(18.0)
    assert "calibration" not in shown.metrics  # the record is its own field
