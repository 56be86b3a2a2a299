"""Ray Train's torch backend, kept off the network when a job's workers share one node.

Ray's own backend has rank 0 serve torch's rendezvous store (`TCPStore`) on every
interface of its node, and gloo binds its pairs to the interface the node's hostname
resolves to: on a machine with a public address both face the network for the job's
lifetime, even for a single worker. When every worker of a job is on one node (always so
in the embedded default) they meet through a `FileStore` in a fresh private folder (no
socket at all) and gloo binds to the loopback interface. Workers spread over nodes must
reach each other over the cluster network: there Ray's backend runs unchanged.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

import psutil
import ray
from ray.train.torch import TorchConfig
from ray.train.torch.config import (
    _set_torch_distributed_env_vars,
    _setup_torch_process_group,
    _TorchBackend,
)

log = logging.getLogger(__name__)
LOOPBACK = "127.0.0.1"


def loopback_interface() -> str:
    """The name of the interface holding 127.0.0.1 (`lo` on Linux, `lo0` on macOS)."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address == LOOPBACK for a in addresses):
            return name
    raise RuntimeError("no network interface holds 127.0.0.1")


def _node_id() -> str:
    return str(ray.get_runtime_context().get_node_id())


def _private_store() -> str:
    """A new folder only this user can read, for one process group's `FileStore`."""
    return tempfile.mkdtemp(prefix="numtune-pg-")  # mode 0700


def _on_loopback(interface: str) -> None:
    os.environ["GLOO_SOCKET_IFNAME"] = interface
    _set_torch_distributed_env_vars()


class _LocalTorchBackend(_TorchBackend):
    """`_TorchBackend` with a socket-free rendezvous for workers on one node."""

    store_dir: str | None = None

    # TorchConfig, as Ray's _TorchBackend.on_start narrows Backend's BackendConfig too.
    def on_start(self, worker_group: Any, backend_config: TorchConfig) -> None:  # type: ignore[override]
        nodes = set(worker_group.execute(_node_id))
        if len(nodes) > 1 or backend_config.backend not in (None, "gloo"):
            log.info("workers on %d nodes: Ray's TCP rendezvous", len(nodes))
            super().on_start(worker_group, backend_config)
            return
        self.store_dir = worker_group.execute_single(0, _private_store)
        interface = worker_group.execute_single(0, loopback_interface)
        worker_group.execute(_on_loopback, interface)
        url = f"file://{self.store_dir}/store"
        ray.get(
            [
                worker_group.execute_single_async(
                    rank,
                    _setup_torch_process_group,
                    backend="gloo",
                    world_rank=rank,
                    world_size=len(worker_group),
                    init_method=url,
                    timeout_s=backend_config.timeout_s,
                )
                for rank in range(len(worker_group))
            ]
        )

    def on_shutdown(self, worker_group: Any, backend_config: Any) -> None:
        # A crashed worker makes these raise; Ray's caller logs that and goes on, and the
        # store's file is removed by torch as its last user closes it.
        super().on_shutdown(worker_group, backend_config)
        if self.store_dir is not None:
            worker_group.execute_single(0, shutil.rmtree, self.store_dir, True)  # their node
            self.store_dir = None


@dataclass
class LocalTorchConfig(TorchConfig):
    """`TorchConfig` whose process group stays off the network on a single node."""

    @property
    def backend_cls(self) -> type[_LocalTorchBackend]:
        return _LocalTorchBackend
