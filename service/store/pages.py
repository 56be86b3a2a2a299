"""Keyset pagination, newest first, shared by every listed table (jobs, studies): a cursor
names the (created_at, id) of the last row of the previous page, so a page is one indexed
range scan however deep the listing goes, and rows created meanwhile never shift it."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Select, or_

from service.store.db import Database
from service.store.schema import JobRow, StudyRow

Row = TypeVar("Row", JobRow, StudyRow)


def encode_cursor(row: JobRow | StudyRow) -> str:
    raw = f"{row.created_at.isoformat()}|{row.id}".encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """(created_at, id) of the last row of the previous page; ValueError if malformed."""
    try:
        created, _, row_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(created), row_id
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError("cursor: not a cursor this API returned") from error


def keyset_page(
    db: Database, query: Select[Any], table: type[Row], limit: int, cursor: str | None
) -> tuple[list[Row], str | None]:
    """One page of `query` (already filtered) over `table`, newest first; the cursor of
    the next page, or None on the last one."""
    if cursor is not None:
        created, row_id = decode_cursor(cursor)
        query = query.where(
            or_(
                table.created_at < created,
                (table.created_at == created) & (table.id < row_id),
            )
        )
    query = query.order_by(table.created_at.desc(), table.id.desc()).limit(limit + 1)
    with db.session() as s:
        rows = list(s.scalars(query))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (encode_cursor(rows[-1]) if more and rows else None)
