"""Who calls a REST route: the bearer token's principal, with the scope the route needs;
and the Idempotency-Key header that makes a POST safe to retry. (What a route needs from
the process is `service/deps.py`.)"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Header
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.auth.access import admit
from service.deps import GateDep
from service.store import Principal, Scope

bearer = HTTPBearer(auto_error=False)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)]


def require(scope: Scope) -> Callable[..., Awaitable[Principal]]:
    """A dependency that admits a live token holding `scope` (admin > submit > read)."""

    # async on purpose: see service/deps.py.
    async def check(gate: GateDep, credentials: Credentials) -> Principal:
        return await admit(gate, credentials, scope)

    return check


Reader = Annotated[Principal, Depends(require("read"))]
Submitter = Annotated[Principal, Depends(require("submit"))]
Admin = Annotated[Principal, Depends(require("admin"))]
