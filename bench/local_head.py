"""A Ray head of the bench's own: `numtune up`'s head launcher, on loopback, every port free.

`ray.init(address="local")` starts a head whose dashboard agent listens on the machine's
address at the fixed port 52365: a second such head on the machine (the suite's integration
Ray, another study) then fails to start its agent. This head binds 127.0.0.1 only, takes a
free port for every listener and requires Ray's token, like the service's own.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ray

from service.cli.ray_head import start_ray_head, stop_ray_head
from service.cli.state import State


@contextlib.contextmanager
def local_head(num_cpus: int, env_vars: dict[str, str], **init: Any) -> Iterator[State]:
    """Start a loopback head with `num_cpus` logical CPUs, connect this process to it
    (`env_vars` for every worker; `init` passes on to ray.init), stop it on exit."""
    home = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    state = State(str(home), "", 0, "127.0.0.1", False, 0, "")
    try:
        start_ray_head(state, num_cpus=num_cpus)
        assert state.ray_token_path is not None  # set by start_ray_head
        os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=state.ray_token_path)
        os.environ.pop("RAY_ADDRESS", None)
        ray.init(
            address=f"127.0.0.1:{state.ray_ports['gcs']}",
            runtime_env={"env_vars": env_vars},
            **init,
        )
        yield state
    finally:
        ray.shutdown()
        stop_ray_head(state)
