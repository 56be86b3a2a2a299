"""The control plane's app factory, where everything is put together: settings → database →
tokens → Ray backend → the services (`build_services`), the background loops led from
this process (`background_loops`, run by `lifespan_of`), then the routers and the
dashboard (`include_routes`). `numtune api` serves `create_app()` with uvicorn."""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from service import errors
from service.auth import routes as tokens
from service.auth.access import TokenGate
from service.backends.kuberay_backend import KubeRayBackend
from service.backends.ray_backend import Backend, RayJobsBackend
from service.files import routes as files
from service.files.uploads import Uploads
from service.fine_tuning import routes as fine_tuning
from service.health import routes as health
from service.health.observability import REGISTRY, JobsCollector, MetricsMiddleware, process_exited
from service.jobs import routes as jobs
from service.jobs.logstream import StreamSlots
from service.jobs.reconciler import FinishHook, Reconciler
from service.platform.guards import BodyGuard
from service.platform.local_files import private_dir, read_secret, write_secret
from service.queue import routes as usage
from service.queue.admission import Policy, Resources
from service.registry import Registry
from service.registry import routes as models
from service.registry.registrar import Registrar
from service.services import Services
from service.settings import Settings
from service.store import (
    Database,
    FileStore,
    JobStore,
    RegistrationOutbox,
    TokenStore,
    exclusive,
    make_lease,
    migrate,
)
from service.studies import routes as studies
from service.studies.progress import StudyLoop
from service.web import routes as web

log = logging.getLogger(__name__)
DEFAULT_RAY_ADDRESS = "http://127.0.0.1:8265"


def dev_admin_token(settings: Settings) -> str:
    """--dev without NUMTUNE_ADMIN_TOKEN: one random admin token kept in <home>, 0600; an
    existing one is used only while nobody else can read or replace it."""
    path = settings.dev_token_file
    if path.exists() or path.is_symlink():
        return read_secret(path)
    token = "nt_dev_" + secrets.token_urlsafe(32)
    write_secret(path, token, exclusive=True)
    return token


def session_key(settings: Settings) -> str:
    """The dashboard's cookie key: configured, or one random key kept in <home> (0600) so
    that every API worker of this host encrypts and reads sessions alike."""
    if settings.session_key is not None:
        return settings.session_key.get_secret_value()
    path = settings.session_key_file
    if path.exists() or path.is_symlink():
        return read_secret(path)
    key = secrets.token_urlsafe(32)
    write_secret(path, key, exclusive=True)
    return key


def make_backend(settings: Settings, jobs: JobStore) -> Backend:
    """Ray's Jobs API (the default), or RayJobs queued by Kueue (NUMTUNE_BACKEND=kuberay),
    each in its owner's team's LocalQueue: their quota group, else the default queue."""
    timeout = settings.worker_start_timeout_s
    env = {"RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": f"{timeout:g}"} if timeout else None
    if settings.backend == "ray":
        address = settings.ray_address or DEFAULT_RAY_ADDRESS
        return RayJobsBackend(address, settings.storage_root, settings.job_python, env=env)
    quotas = settings.quotas

    def queue_of(job_id: str) -> str:
        row = jobs.get(job_id)
        owner = row.owner if row is not None else ""
        return quotas.groups.get(owner, settings.kube_cluster_queue)

    return KubeRayBackend(
        settings.kube_api,
        settings.kube_namespace,
        settings.storage_root,
        "python",  # the Ray image's interpreter
        image=settings.kube_image,
        cluster_queue=settings.kube_cluster_queue,
        queue_of=queue_of,
        worker_memory_mb=settings.worker_memory_mb,
        default_priority=settings.priority_default,
        env=env,
        token=read_secret(settings.kube_token_file) if settings.kube_token_file else None,
    )


def build_services(settings: Settings, backend: Backend | None = None) -> Services:
    settings.check_secure()
    private_dir(settings.home)  # the database, logs and secrets live here
    db = Database(settings.database_url)
    token_store = TokenStore(db)
    # API workers start together: one at a time migrates and writes the admin token.
    with exclusive(db, "startup"):
        migrate(db.engine)
        if settings.admin_token is not None:
            admin = settings.admin_token.get_secret_value()
        else:
            admin = dev_admin_token(settings)
            log.warning(
                "DEV MODE: no NUMTUNE_ADMIN_TOKEN; bound to %s only, admin token in %s",
                settings.host,
                settings.dev_token_file,
            )
        token_store.adopt("admin", ["admin"], admin, "configured admin")
        web_key = session_key(settings)
    job_store = JobStore(db)
    backend = backend or make_backend(settings, job_store)
    registry = Registry(
        db, settings.storage_root, settings.home / "cache" / "served", settings.mlflow_uri
    )
    gate = TokenGate(token_store, settings.token_cache_s)
    uploads = Uploads(settings.storage_root, settings.max_upload_bytes)
    return Services(
        settings=settings,
        db=db,
        jobs=job_store,
        tokens=token_store,
        backend=backend,
        registry=registry,
        gate=gate,
        files=FileStore(db),
        uploads=uploads,
        session_key=web_key,
    )


def background_loops(
    settings: Settings, services: Services, on_finished: list[FinishHook] | None
) -> tuple[Reconciler, Registrar, StudyLoop]:
    """The loops one API process leads while it holds their lease: the reconciler (every
    job from queued to its end), the registrar (a succeeded job's checkpoint becomes a
    model version: a durable, retried step of its own; the reconciler only writes it
    down) and the study loop (studies moved on from their jobs' rows)."""
    reconciler = Reconciler(
        services.jobs,
        services.backend,
        settings.storage_root,
        interval_s=settings.reconcile_interval_s,
        unreachable_timeout_s=settings.unreachable_timeout_s,
        submit_attempts=settings.submit_attempts,
        policy=Policy(
            reserved=Resources(settings.reserved_cpus),
            aging_s=settings.queue_aging_s,
            max_running_per_owner=settings.max_running_per_owner,
            owner_share=settings.owner_share,
            quotas=settings.quotas,
            priorities=settings.priorities,
            preemption=settings.preemption,
        ),
        start_retries=settings.start_retries,
        max_timeout_s=settings.max_timeout_s,
        max_log_chars=settings.max_log_chars,
        on_finished=on_finished,
        # One reconciler among all API processes on this database.
        lease=make_lease(services.db, "reconciler"),
    )
    registrar = Registrar(
        RegistrationOutbox(services.db),
        services.registry.register_job,
        interval_s=settings.reconcile_interval_s,
        attempts=settings.registration_attempts,
        retry_s=settings.registration_retry_s,
        lease=make_lease(services.db, "registrar"),
    )
    study_loop = StudyLoop(
        services,
        reconciler.follow,
        settings.reconcile_interval_s,
        lease=make_lease(services.db, "studies"),
    )
    return reconciler, registrar, study_loop


def lifespan_of(
    settings: Settings,
    services: Services,
    reconcile: bool,
    on_finished: list[FinishHook] | None,
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's life: the jobs collector and the loops from start-up (the loops started
    only with `reconcile`), everything stopped and the database released at shutdown."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        collector = JobsCollector(services.jobs.count_by_status)
        REGISTRY.register(collector)
        app.state.jobs_collector = collector
        reconciler, registrar, study_loop = background_loops(settings, services, on_finished)
        app.state.reconciler = reconciler
        app.state.registrar = registrar
        if reconcile:
            reconciler.start()
            registrar.start()
            study_loop.start()
        try:
            yield
        finally:
            study_loop.stop()
            reconciler.stop()
            registrar.stop()
            REGISTRY.unregister(collector)
            services.db.dispose()
            process_exited()

    return lifespan


def include_routes(app: FastAPI, settings: Settings, services: Services) -> None:
    """The REST routers (documented), the dashboard under /ui (not in the schema), the
    error bodies, and the guards every request passes first."""
    errors.install(app)
    for router in (
        health.router,
        jobs.make_router("job"),
        jobs.make_router("tune"),
        studies.router,
        tokens.router,
        models.router,
        files.router,
        fine_tuning.router,
        usage.router,
    ):
        app.include_router(router, responses=errors.RESPONSES)
    if not settings.publish_docs:
        app.include_router(health.schema_router(), responses=errors.RESPONSES)
    web.install(app, settings, services.session_key)
    # An upload's file part may reach the cap; the multipart framing around it is small.
    uploads = {"/v1/files": settings.max_upload_bytes + 64 * 1024}
    large = {"/v1/studies/resume": settings.max_kept_bytes}
    app.add_middleware(
        BodyGuard,
        max_bytes=settings.max_body_bytes,
        uploads=uploads,
        form_prefix="/ui/",
        large=large,
    )
    app.add_middleware(MetricsMiddleware)


def create_app(
    settings: Settings | None = None,
    *,
    backend: Backend | None = None,
    reconcile: bool = True,
    on_finished: list[FinishHook] | None = None,
) -> FastAPI:
    settings = settings or Settings()
    services = build_services(settings, backend)
    # The schema and docs describe every route: public only when published on purpose.
    public = {} if settings.publish_docs else {"openapi_url": None, "docs_url": None}
    app = FastAPI(
        title="numtune",
        version="0.1.0",
        summary="Fine-tune language models with numeric-aware losses on Ray",
        lifespan=lifespan_of(settings, services, reconcile, on_finished),
        redoc_url=None,
        **public,  # type: ignore[arg-type]
    )
    app.state.services = services
    app.state.log_streams = StreamSlots(
        settings.max_log_streams, settings.max_log_streams_per_owner
    )
    include_routes(app, settings, services)
    return app
