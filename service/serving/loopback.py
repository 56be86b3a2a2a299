"""Keeping Ray Serve's replica-internal gRPC server off the network when serving is local."""

from __future__ import annotations

from typing import Any


def keep_internal_grpc_on_loopback() -> None:
    """Ray Serve 2.60 binds each replica's inter-deployment gRPC server to [::]:0 (all
    interfaces), with no setting to change it. When serving is loopback-only (the
    embedded default, all on one machine) bind it to 127.0.0.1 as well, so nothing of
    numtune faces the network. Runs in the replica before Serve starts that server;
    on a multi-node cluster (host 0.0.0.0) the proxy must reach replicas, so it is left."""
    from ray.serve._private import replica

    original = replica.add_port_to_grpc_server
    if getattr(original, "numtune_loopback", False):
        return

    def on_loopback(server: Any, address: str) -> int:
        port: int = original(server, address.replace("[::]", "127.0.0.1", 1))
        return port

    on_loopback.numtune_loopback = True  # type: ignore[attr-defined]
    replica.add_port_to_grpc_server = on_loopback
