"""Typed dependencies, one per thing a route needs: a service of the process (the job
store, the registry, ...) or a use case's collaborators bound together (`SubmissionDep`,
`CancelDep`). The REST routers and the dashboard's pages both take them from here; who
calls (a bearer token, a session) is theirs: `service/auth/callers.py`, `service/web/deps.py`.

They are `async def` on purpose: FastAPI runs a plain `def` dependency in the threadpool,
and a thread hop per dependency cost more than the work itself.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from service.auth.access import TokenGate
from service.backends.ray_backend import Backend
from service.files.uploads import Uploads
from service.jobs.cancel import Canceller
from service.jobs.submit import Submission
from service.registry import Registry
from service.services import Services
from service.settings import Settings
from service.store import Database, FileStore, JobRow, JobStore, StudyStore, TokenStore


def services_of(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


async def _settings(request: Request) -> Settings:
    return services_of(request).settings


async def _database(request: Request) -> Database:
    return services_of(request).db


async def _jobs(request: Request) -> JobStore:
    return services_of(request).jobs


async def _studies(request: Request) -> StudyStore:
    return services_of(request).studies


async def _tokens(request: Request) -> TokenStore:
    return services_of(request).tokens


async def _gate(request: Request) -> TokenGate:
    return services_of(request).gate


async def _backend(request: Request) -> Backend:
    return services_of(request).backend


async def _registry(request: Request) -> Registry:
    return services_of(request).registry


async def _files(request: Request) -> FileStore:
    return services_of(request).files


async def _uploads(request: Request) -> Uploads:
    return services_of(request).uploads


async def _submission(request: Request) -> Submission:
    s = services_of(request)
    return Submission(s.settings, s.registry, s.files, s.uploads, s.jobs, s.backend)


async def _canceller(request: Request) -> Canceller:
    """Cancelling records the end of a job Ray saw finish through the reconciler (the
    app's lifespan starts it: looked up only when a cancel needs it)."""
    s = services_of(request)

    def record_end(row: JobRow) -> object:
        return request.app.state.reconciler.follow(row)

    return Canceller(s.jobs, s.backend, record_end)


SettingsDep = Annotated[Settings, Depends(_settings)]
DatabaseDep = Annotated[Database, Depends(_database)]
JobsDep = Annotated[JobStore, Depends(_jobs)]
StudiesDep = Annotated[StudyStore, Depends(_studies)]
TokensDep = Annotated[TokenStore, Depends(_tokens)]
GateDep = Annotated[TokenGate, Depends(_gate)]
BackendDep = Annotated[Backend, Depends(_backend)]
RegistryDep = Annotated[Registry, Depends(_registry)]
FilesDep = Annotated[FileStore, Depends(_files)]
UploadsDep = Annotated[Uploads, Depends(_uploads)]
SubmissionDep = Annotated[Submission, Depends(_submission)]
CancelDep = Annotated[Canceller, Depends(_canceller)]
