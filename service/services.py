"""The process's services: built once by the app factory (`service/app.py`), kept on
`app.state.services`. Routes never take the bundle: `service/deps.py` hands each one the
service or use case it needs; the background loops get what they follow from it."""

from __future__ import annotations

from dataclasses import dataclass, field

from service.auth.access import TokenGate
from service.backends.ray_backend import Backend
from service.files.uploads import Uploads
from service.registry import Registry
from service.settings import Settings
from service.store import Database, FileStore, JobStore, StudyStore, TokenStore


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
    studies: StudyStore = field(init=False)

    def __post_init__(self) -> None:
        self.studies = StudyStore(self.db)
