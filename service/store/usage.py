"""The rows compute usage is counted from (service/queue/usage.py): every job that ran at some
time inside a window, with the few columns usage needs; a Core select, so a day of finished
jobs costs no metrics, results or trials tables."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select

from service.store.db import Database
from service.store.schema import JobRow

_TABLE = JobRow.__table__
_NAMES = ("id", "kind", "owner", "spec_sha256", "status", "created_at")
_STAMPS = ("started_at", "finished_at", "ran_seconds", "ran_until")
_COLUMNS = [_TABLE.c[name] for name in (*_NAMES, *_STAMPS)]


def ran_since(db: Database, since: datetime, owners: Sequence[str] | None = None) -> list[JobRow]:
    """Jobs that started and had not finished before `since` (running ones too), and
    jobs that last stopped for a pause after it (paused, or back in the queue); only
    `owners`' when given. Rows carry only the columns above: not their spec (`specs`)."""
    ran = (_TABLE.c.started_at.is_not(None)) & or_(
        _TABLE.c.finished_at.is_(None), _TABLE.c.finished_at >= since
    )
    query = select(*_COLUMNS).where(or_(ran, _TABLE.c.ran_until >= since))
    if owners is not None:
        query = query.where(_TABLE.c.owner.in_(list(owners)))
    with db.session() as s:
        found = s.execute(query.order_by(_TABLE.c.started_at)).all()
    return [JobRow.of_columns(row._asdict()) for row in found]


def specs(db: Database, keys: set[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
    """One stored spec JSON for each (kind, spec digest): a pass decodes each distinct spec
    once, not every row's."""
    shas = sorted({sha for _, sha in keys})
    query = select(_TABLE.c.kind, _TABLE.c.spec_sha256, _TABLE.c.spec).where(
        _TABLE.c.spec_sha256.in_(shas)
    )
    found: dict[tuple[str, str], dict[str, Any]] = {}
    with db.session() as s:
        for kind, sha, spec in s.execute(query.distinct()):
            if (kind, sha) in keys:
                found.setdefault((kind, sha), spec)
    return found
