"""The only package that speaks SQL: schema, migrations and queries."""

from service.store.db import Database, migrate
from service.store.files import FileStore
from service.store.jobs import IdempotencyConflictError, JobStore
from service.store.lease import Lease, exclusive, make_lease
from service.store.outbox import RegistrationOutbox
from service.store.schema import FileRow, JobRow, StudyRow, TokenRow, UnreadableSpecError
from service.store.studies import StudyStore
from service.store.tokens import SCOPES, Principal, Scope, TokenStore

__all__ = [
    "SCOPES",
    "Database",
    "FileRow",
    "FileStore",
    "IdempotencyConflictError",
    "JobRow",
    "JobStore",
    "Lease",
    "Principal",
    "RegistrationOutbox",
    "Scope",
    "StudyRow",
    "StudyStore",
    "TokenRow",
    "TokenStore",
    "UnreadableSpecError",
    "exclusive",
    "make_lease",
    "migrate",
]
