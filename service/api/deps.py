"""Typed dependencies: the process's services and the calling principal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.auth import TokenGate, admit
from service.ray_backend import Backend
from service.registry import Registry
from service.settings import Settings
from service.store import Database, FileStore, JobStore, Principal, Scope, TokenStore
from service.uploads import Uploads


@dataclass
class Services:
    settings: Settings
    db: Database
    jobs: JobStore
    tokens: TokenStore
    backend: Backend
    registry: Registry
    gate: TokenGate  # cached token lookups: saves a query per request
    files: FileStore
    uploads: Uploads
    session_key: str = ""  # the dashboard's cookie key (service/web/session.py)


# The dependencies below are `async def` on purpose: FastAPI runs a plain `def` dependency
# in the threadpool, and a thread hop per dependency cost more than the work itself.
async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]
bearer = HTTPBearer(auto_error=False)


def require(scope: Scope) -> Callable[..., Awaitable[Principal]]:
    """A dependency that admits a live token holding `scope` (admin > submit > read)."""

    async def check(
        services: ServicesDep,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Principal:
        return await admit(services.gate, credentials, scope)

    return check


Reader = Annotated[Principal, Depends(require("read"))]
Submitter = Annotated[Principal, Depends(require("submit"))]
Admin = Annotated[Principal, Depends(require("admin"))]
