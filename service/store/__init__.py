"""The only package that speaks SQL: schema, migrations and queries."""

from service.store.db import Database, migrate
from service.store.jobs import (
    ACTIVE,
    TERMINAL,
    IdempotencyConflictError,
    JobStore,
)
from service.store.schema import JobRow, TokenRow
from service.store.tokens import SCOPES, Principal, TokenStore

__all__ = [
    "ACTIVE",
    "SCOPES",
    "TERMINAL",
    "Database",
    "IdempotencyConflictError",
    "JobRow",
    "JobStore",
    "Principal",
    "TokenRow",
    "TokenStore",
    "migrate",
]
