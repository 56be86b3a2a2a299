"""Deploying the serving application (service/serving/deployment.py) on Ray Serve: the
app built from settings, `deploy` for the embedded default and `numtune up`, and the
import path a KubeRay RayService names.

    python -m service.serving.deploy deploy --port 8000 [--address 127.0.0.1:PORT]
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any, cast

import ray
from ray import serve

from service.serving import http_guard
from service.serving.api import ReplicaConfig, ServeConfig
from service.serving.deployment import NumtuneServing
from service.settings import Settings

log = logging.getLogger(__name__)

APP_NAME = "numtune-serving"


def build_app(settings: Settings, config: ServeConfig | None = None) -> serve.Application:
    config = config or ServeConfig()
    if config.max_replicas < config.min_replicas:
        raise ValueError("NUMTUNE_SERVE_MAX_REPLICAS: must be at least NUMTUNE_SERVE_MIN_REPLICAS")
    replica = ReplicaConfig(
        database_url=settings.database_url,
        storage_root=settings.storage_root,
        cache_dir=str(settings.home / "cache" / "serving"),
        token_cache_s=settings.token_cache_s,
        serve=config,
    )
    scaling: dict[str, Any] = {"num_replicas": config.min_replicas}
    if config.max_replicas > config.min_replicas:
        scaling = {
            "autoscaling_config": {
                "min_replicas": config.min_replicas,
                "max_replicas": config.max_replicas,
                "target_ongoing_requests": config.target_ongoing_requests,
            }
        }
    deployment = cast(serve.Deployment, NumtuneServing).options(
        max_ongoing_requests=config.max_ongoing_requests,
        ray_actor_options={"num_cpus": config.replica_cpus},
        **scaling,
    )
    return deployment.bind(replica.model_dump())


def deploy(
    settings: Settings, *, port: int, address: str | None = None, config: ServeConfig | None = None
) -> None:
    """Start Serve's HTTP proxy on NUMTUNE_SERVE_HOST (127.0.0.1):`port` and run the app
    (returns once it is running; the app outlives this process). Connects to Ray at
    `address` unless this process already has Ray initialised."""
    config = config or ServeConfig()
    if not ray.is_initialized():
        ray.init(address=address or os.environ.get("RAY_ADDRESS") or "auto")
    # The proxy's uvicorn takes its request-head cap and read timeouts from http_guard: Serve
    # runs the callback named here in each proxy (proxies inherit the controller's env).
    env = {k: v for k, v in os.environ.items() if k.startswith("NUMTUNE_HTTP_")}
    env[http_guard.PROXY_CALLBACK_ENV] = http_guard.PROXY_CALLBACK
    serve.start(
        http_options={"host": config.host, "port": port},
        controller_options={"runtime_env": {"env_vars": env}},
    )
    serve.run(build_app(settings, config), name=APP_NAME, route_prefix="/", blocking=False)
    log.info("%s running on http://%s:%d", APP_NAME, config.host, port)


def app_builder(args: dict[str, str]) -> serve.Application:
    """The import path a RayService config names (`service.serving.deploy:app_builder`): the app
    from NUMTUNE_* settings, with `args` overriding NUMTUNE_SERVE_* fields."""
    # Through __init__, not model_validate: NUMTUNE_SERVE_* variables still apply.
    return build_app(Settings(), ServeConfig(**cast(dict[str, Any], args)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m service.serving.deploy")
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("deploy", help="deploy (or update) the serving app")
    up.add_argument("--port", type=int, default=None, help="HTTP port (default: serve_port)")
    down = commands.add_parser("delete", help="delete the serving app")
    for sub in (up, down):
        sub.add_argument("--address", default=None, help="Ray address (default: RAY_ADDRESS)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings()
    if args.command == "deploy":
        deploy(settings, port=args.port or settings.serve_port, address=args.address)
    else:
        ray.init(address=args.address or os.environ.get("RAY_ADDRESS") or "auto")
        serve.delete(APP_NAME)


if __name__ == "__main__":
    main()
