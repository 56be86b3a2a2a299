"""Issue 30 item 6 (M3): numtune's jobs form their process group through the loopback
rendezvous (`jobs.train.rendezvous`); `tests/e2e/test_up.py` watches a real job's workers listen
on loopback only, and the DDP tests in `tests/integration/test_train.py` train through it."""

from __future__ import annotations

from pathlib import Path

import psutil

from jobs.records.run_files import RunFiles
from jobs.spec import JobSpec
from jobs.train.rendezvous import LOOPBACK, LocalTorchConfig, loopback_interface
from jobs.train.runner import build_trainer


def test_the_loopback_interface_is_the_one_holding_127_0_0_1() -> None:
    name = loopback_interface()
    assert LOOPBACK in {a.address for a in psutil.net_if_addrs()[name]}


def test_numtune_jobs_use_the_local_rendezvous(tmp_path: Path) -> None:
    spec = JobSpec.model_validate(
        {"name": "probe", "model": {"source": "random:tiny-digit"}, "data": {"task": "add"}}
    )
    trainer = build_trainer(spec, RunFiles.for_job("probe", str(tmp_path)))
    assert isinstance(trainer.backend_config, LocalTorchConfig)
