"""Bearer tokens, for admins: revoking one takes effect at once. (Creating and listing
them are the token store's own queries.)"""

from __future__ import annotations

from service.auth.access import TokenGate
from service.errors import NotFound
from service.store import TokenStore


def revoke(tokens: TokenStore, gate: TokenGate, token_id: str) -> None:
    """Revoke a live token, at once: the cached lookups are dropped, not left to expire."""
    if not tokens.revoke(token_id):
        raise NotFound(f"no live token {token_id!r}")
    gate.forget()
