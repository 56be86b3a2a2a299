"""One local Ray head for the whole integration session (each ray.init costs 4-6 s)."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """A local Ray head for the session; yields its Jobs API URL (the dashboard)."""
    # Dummy credentials for the S3-compatible test server; set before Ray starts so the
    # workers inherit them.
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ[key] = "numtune-test"
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    # Logical CPUs above the 2 physical cores leave room for Train's controller actors;
    # the workers still share the same two cores.
    # A stale RAY_ADDRESS (left by an earlier ray.init in this process) would be inherited
    # by the new cluster's processes.
    os.environ.pop("RAY_ADDRESS", None)
    context = ray.init(
        address="local",  # never attach to another Ray running on this machine
        _temp_dir=(temp_dir := tempfile.mkdtemp(prefix="ntr", dir="/tmp")),
        dashboard_port=_free_port(),
        num_cpus=4,
        include_dashboard=True,
        dashboard_host="127.0.0.1",
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}},
        log_to_driver=True,
    )
    # A job's driver finds its cluster through `ray_current_cluster` in the node's temp dir,
    # which `ray.init` (unlike `ray start`) does not write; without it the driver takes the
    # first GCS running on the machine, another Ray's where one runs (and hangs there).
    Path(temp_dir, "ray_current_cluster").write_text(ray.get_runtime_context().gcs_address)
    assert os.environ.get("NUMTUNE_HOME")
    yield f"http://{context.dashboard_url}"
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)
