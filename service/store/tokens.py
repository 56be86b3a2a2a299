"""API tokens: random secrets shown once, stored as sha256 (they are high-entropy, so a
fast hash is enough), with scopes and an owner."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Literal, get_args

from sqlalchemy import select, update

from service.store.db import Database
from service.store.job_rows import now
from service.store.schema import TokenRow

# Weakest first: a scope grants every scope listed before it (admin > submit > read).
Scope = Literal["read", "submit", "admin"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
PREFIX = "nt_"


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who is calling: the owner their jobs belong to, and what they may do."""

    owner: str
    scopes: frozenset[str]
    token_id: str

    @property
    def is_admin(self) -> bool:
        return "admin" in self.scopes

    def allows(self, scope: Scope) -> bool:
        order = SCOPES.index(scope)
        return any(SCOPES.index(s) >= order for s in self.scopes)


class TokenStore:
    def __init__(self, db: Database):
        self.db = db

    def create(
        self, owner: str, scopes: list[str], name: str = "", *, secret: str | None = None
    ) -> tuple[TokenRow, str]:
        """A new token (row, the secret). `secret` adopts a configured one (admin)."""
        bad = [s for s in scopes if s not in SCOPES]
        if bad or not scopes:
            raise ValueError(f"scopes: unknown {bad}; choose from {', '.join(SCOPES)}")
        secret = secret or PREFIX + secrets.token_urlsafe(32)
        row = TokenRow(
            id=secrets.token_hex(8),
            owner=owner,
            name=name or owner,
            scopes=" ".join(sorted(set(scopes), key=SCOPES.index)),
            token_sha256=token_digest(secret),
            created_at=now(),
        )
        with self.db.session() as s:
            s.add(row)
        return row, secret

    def adopt(self, owner: str, scopes: list[str], secret: str, name: str) -> None:
        """Make `secret` the one live token called `name` (the configured or dev admin token
        at start): a rotated or abandoned predecessor stops working."""
        digest = token_digest(secret)
        with self.db.session() as s:
            found = s.scalars(select(TokenRow).where(TokenRow.token_sha256 == digest)).first()
            if found is not None:
                found.revoked_at = None  # configured again after a rotation: live again
            s.execute(
                update(TokenRow)
                .where(
                    TokenRow.name == name,
                    TokenRow.token_sha256 != digest,
                    TokenRow.revoked_at.is_(None),
                )
                .values(revoked_at=now())
            )
        if found is None:
            self.create(owner, scopes, name, secret=secret)

    def lookup(self, secret: str) -> Principal | None:
        with self.db.session() as s:
            row = s.scalars(
                select(TokenRow).where(
                    TokenRow.token_sha256 == token_digest(secret), TokenRow.revoked_at.is_(None)
                )
            ).first()
        if row is None:
            return None
        return Principal(row.owner, frozenset(row.scopes.split()), row.id)

    def all(self, owner: str | None = None) -> list[TokenRow]:
        query = select(TokenRow).order_by(TokenRow.created_at)
        if owner is not None:
            query = query.where(TokenRow.owner == owner)
        with self.db.session() as s:
            return list(s.scalars(query))

    def revoke(self, token_id: str) -> bool:
        with self.db.session() as s:
            done = s.execute(
                update(TokenRow)
                .where(TokenRow.id == token_id, TokenRow.revoked_at.is_(None))
                .values(revoked_at=now())
            )
        return bool(done.rowcount)  # type: ignore[attr-defined]
