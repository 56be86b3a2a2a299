"""The control plane's app factory: settings → database → tokens → Ray backend →
reconciler, then the routers. `numtune api` serves `create_app()` with uvicorn."""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service import errors
from service.api import health, jobs, models, tokens
from service.api.deps import Services
from service.auth import TokenGate
from service.guards import BodyGuard
from service.logstream import StreamSlots
from service.observability import REGISTRY, JobsCollector, MetricsMiddleware
from service.ray_backend import Backend, RayJobsBackend
from service.reconciler import FinishHook, Reconciler
from service.registry import Registry
from service.settings import Settings
from service.store import Database, JobStore, TokenStore, migrate

log = logging.getLogger(__name__)
DEFAULT_RAY_ADDRESS = "http://127.0.0.1:8265"


def dev_admin_token(settings: Settings) -> str:
    """--dev without NUMTUNE_ADMIN_TOKEN: one random admin token kept in <home>, 0600."""
    path = settings.dev_token_file
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    token = "nt_dev_" + secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    return token


def build_services(settings: Settings, backend: Backend | None = None) -> Services:
    settings.check_secure()
    db = Database(settings.database_url)
    migrate(db.engine)
    token_store = TokenStore(db)
    if settings.admin_token is not None:
        admin = settings.admin_token.get_secret_value()
    else:
        admin = dev_admin_token(settings)
        log.warning(
            "DEV MODE: no NUMTUNE_ADMIN_TOKEN; bound to %s only, admin token in %s",
            settings.host,
            settings.dev_token_file,
        )
    token_store.ensure("admin", ["admin"], admin, "configured admin")
    backend = backend or RayJobsBackend(
        settings.ray_address or DEFAULT_RAY_ADDRESS, settings.storage_root, settings.job_python
    )
    registry = Registry(db, settings.storage_root, settings.home / "cache" / "served")
    gate = TokenGate(token_store, settings.token_cache_s)
    return Services(settings, db, JobStore(db), token_store, backend, registry, gate)


def create_app(
    settings: Settings | None = None,
    *,
    backend: Backend | None = None,
    reconcile: bool = True,
    on_finished: list[FinishHook] | None = None,
) -> FastAPI:
    settings = settings or Settings()
    services = build_services(settings, backend)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        collector = JobsCollector(services.jobs.count_by_status)
        REGISTRY.register(collector)
        reconciler = Reconciler(
            services.jobs,
            services.backend,
            settings.storage_root,
            interval_s=settings.reconcile_interval_s,
            unreachable_timeout_s=settings.unreachable_timeout_s,
            submit_attempts=settings.submit_attempts,
            max_running_per_owner=settings.max_running_per_owner,
            max_timeout_s=settings.max_timeout_s,
            max_log_chars=settings.max_log_chars,
            # Every succeeded job's best checkpoint becomes a model version.
            on_finished=[services.registry.register_job, *(on_finished or [])],
        )
        app.state.reconciler = reconciler
        if reconcile:
            reconciler.start()
        try:
            yield
        finally:
            reconciler.stop()
            REGISTRY.unregister(collector)
            services.db.dispose()

    app = FastAPI(
        title="numtune",
        version="0.1.0",
        summary="Fine-tune language models with numeric-aware losses on Ray",
        lifespan=lifespan,
    )
    app.state.services = services
    app.state.log_streams = StreamSlots(
        settings.max_log_streams, settings.max_log_streams_per_owner
    )
    errors.install(app)
    for router in (
        health.router,
        jobs.make_router("job"),
        jobs.make_router("tune"),
        tokens.router,
        models.router,
    ):
        app.include_router(router, responses=errors.RESPONSES)
    app.add_middleware(BodyGuard, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware)
    return app
