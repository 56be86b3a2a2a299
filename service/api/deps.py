"""Typed dependencies: the process's services and the calling principal."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.errors import Forbidden, Unauthorized
from service.ray_backend import Backend
from service.registry import Registry
from service.settings import Settings
from service.store import Database, JobStore, Principal, TokenStore
from service.store.tokens import token_digest


@dataclass
class Services:
    settings: Settings
    db: Database
    jobs: JobStore
    tokens: TokenStore
    backend: Backend
    registry: Registry
    # token sha256 -> (principal or None, expiry): saves a query per request.
    _token_cache: dict[str, tuple[Principal | None, float]] = field(default_factory=dict)

    def cached_principal(self, secret: str) -> tuple[bool, Principal | None]:
        """(True, principal or None) from the cache without I/O; (False, None) on a miss."""
        hit = self._token_cache.get(token_digest(secret))
        if hit is not None and hit[1] > time.monotonic():
            return True, hit[0]
        return False, None

    def authenticate(self, secret: str) -> Principal | None:
        found, principal = self.cached_principal(secret)
        if found:
            return principal
        key, clock = token_digest(secret), time.monotonic()
        principal = self.tokens.lookup(secret)
        if len(self._token_cache) > 10_000:
            self._token_cache.clear()
        self._token_cache[key] = (principal, clock + self.settings.token_cache_s)
        return principal

    def forget_tokens(self) -> None:
        self._token_cache.clear()


# The dependencies below are `async def` on purpose: FastAPI runs a plain `def` dependency
# in the threadpool, and a thread hop per dependency cost more than the work itself.
async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]
_bearer = HTTPBearer(auto_error=False)


def require(scope: str) -> Callable[..., Awaitable[Principal]]:
    """A dependency that admits a live token holding `scope` (admin > submit > read)."""

    async def check(
        services: ServicesDep,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        challenge = {"WWW-Authenticate": "Bearer"}
        if credentials is None:
            raise Unauthorized(
                "missing bearer token (Authorization: Bearer <token>)", headers=challenge
            )
        found, principal = services.cached_principal(credentials.credentials)
        if not found:  # a database lookup: off the event loop
            principal = await run_in_threadpool(services.authenticate, credentials.credentials)
        if principal is None:
            raise Unauthorized("unknown or revoked token", headers=challenge)
        if not principal.allows(scope):
            raise Forbidden(f"this token lacks the {scope!r} scope")
        return principal

    return check


Reader = Annotated[Principal, Depends(require("read"))]
Submitter = Annotated[Principal, Depends(require("submit"))]
Admin = Annotated[Principal, Depends(require("admin"))]
