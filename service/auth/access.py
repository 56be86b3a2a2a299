"""Bearer-token admission, shared by the control plane and the serving replicas: a cached
token lookup (`TokenGate`) and the scope check (`admit`) that gives the same 401/403."""

from __future__ import annotations

import time
from typing import Any

from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials

from service.errors import Forbidden, Unauthorized
from service.store import Principal, Scope, TokenStore
from service.store.tokens import token_digest


class TTLCache:
    """A small dict whose entries expire after `ttl_s` (token and reference lookups)."""

    def __init__(self, ttl_s: float, max_entries: int = 10_000) -> None:
        self.ttl_s, self.max_entries = ttl_s, max_entries
        self._data: dict[Any, tuple[Any, float]] = {}

    def get(self, key: Any) -> tuple[bool, Any]:
        """(True, value) while the entry lives; (False, None) on a miss or after expiry."""
        hit = self._data.get(key)
        if hit is None or hit[1] <= time.monotonic():
            return False, None
        return True, hit[0]

    def put(self, key: Any, value: Any) -> None:
        if len(self._data) >= self.max_entries:
            self._data.clear()
        self._data[key] = (value, time.monotonic() + self.ttl_s)

    def clear(self) -> None:
        self._data.clear()


class TokenGate:
    """Token → principal (None for an unknown or revoked token), cached for `ttl_s` under
    the token's sha256, so a request usually costs no query and no secret stays in memory."""

    def __init__(self, tokens: TokenStore, ttl_s: float) -> None:
        self.tokens, self.cache = tokens, TTLCache(ttl_s)

    def cached_principal(self, secret: str) -> tuple[bool, Principal | None]:
        """(True, principal or None) from the cache without I/O; (False, None) on a miss."""
        found, principal = self.cache.get(token_digest(secret))
        return found, principal

    def authenticate(self, secret: str) -> Principal | None:
        """The principal, from the cache or else the database (blocking I/O)."""
        key = token_digest(secret)
        found, principal = self.cache.get(key)
        if not found:
            principal = self.tokens.lookup(secret)
            self.cache.put(key, principal)
        return principal

    def forget(self) -> None:
        """Drop every cached answer: a revocation takes effect now, not at expiry."""
        self.cache.clear()


async def admit(
    gate: TokenGate, credentials: HTTPAuthorizationCredentials | None, scope: Scope
) -> Principal:
    """The caller's principal if its token is live and holds `scope`, else 401 or 403."""
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        raise Unauthorized(
            "missing bearer token (Authorization: Bearer <token>)", headers=challenge
        )
    found, principal = gate.cached_principal(credentials.credentials)
    if not found:  # a database lookup: off the event loop
        principal = await run_in_threadpool(gate.authenticate, credentials.credentials)
    if principal is None:
        raise Unauthorized("unknown or revoked token", headers=challenge)
    if not principal.allows(scope):
        raise Forbidden(f"this token lacks the {scope!r} scope")
    return principal
