"""Uploaded files as one caller sees them: upload one (checked whole, within the owner's
quota), list, read and delete them. Another owner's file reads as missing (404); a file a
queued or running job reads cannot be deleted (409)."""

from __future__ import annotations

import os
import secrets
import threading
from typing import BinaryIO

from sqlalchemy.exc import SQLAlchemyError

from service.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge, QuotaExceeded
from service.files.schemas import FileDeleted, FileOut
from service.files.uploads import BadRowsError, OverQuotaError, TooLargeError, Uploads
from service.jobs.run_storage import RunStorage
from service.jobs.use_cases import scope_of
from service.store import FileRow, FileStore, Principal
from service.store.job_rows import now

OWNER_LOCKS: dict[str, threading.Lock] = {}


def visible(files: FileStore, file_id: str, who: Principal) -> FileRow:
    """The file if the caller may see it; else 404 (another owner's file reads as missing)."""
    row = files.get(file_id, scope_of(who))
    if row is None:
        raise NotFound(f"no file {file_id!r}")
    return row


def receive(
    files: FileStore,
    uploads: Uploads,
    quota_bytes: int,
    who: Principal,
    upload: tuple[str | None, BinaryIO],
    purpose: str,
) -> FileOut:
    """Store, check and record one upload, `(its file name, its bytes)` (blocking: run it
    in the threadpool). One owner's uploads take turns, so that the quota left is read
    with no other upload of theirs half-way."""
    with OWNER_LOCKS.setdefault(who.owner, threading.Lock()):  # setdefault is atomic
        return _receive(files, uploads, quota_bytes, who, upload, purpose)


def _receive(
    files: FileStore,
    uploads: Uploads,
    quota_bytes: int,
    who: Principal,
    upload: tuple[str | None, BinaryIO],
    purpose: str,
) -> FileOut:
    filename, stream = upload
    file_id = f"file-{secrets.token_hex(12)}"
    name = os.path.basename(filename or "")[:255] or "upload"
    image = purpose == "vision"
    # Run folders count too: an owner's jobs write checkpoints into the same storage.
    left = quota_bytes - files.used(who.owner) - RunStorage(uploads.uri, files.db).used(who.owner)
    try:
        stored = uploads.store(who.owner, file_id, stream, name, image, left, purpose == "table")
    except OverQuotaError as error:
        raise QuotaExceeded(str(error)) from error
    except TooLargeError as error:
        raise PayloadTooLarge(str(error)) from error
    except BadRowsError as error:
        raise InvalidRequest([{"field": "file", "message": p} for p in error.problems]) from error
    row = FileRow(
        id=file_id,
        owner=who.owner,
        filename=name,
        purpose=purpose,
        bytes=stored.bytes,
        sha256=stored.sha256,
        rows=stored.rows,
        location=stored.location,
        created_at=now(),
    )
    try:
        files.add(row)
    except SQLAlchemyError:
        uploads.remove(stored.location)  # no file without its row
        raise
    return FileOut.of(row)


def listing(
    files: FileStore, who: Principal, after: str | None, limit: int
) -> tuple[list[FileRow], bool]:
    """Newest first, from the file after `after`; and whether more follow."""
    start = visible(files, after, who) if after is not None else None
    return files.page(scope_of(who), limit, start)


def delete(files: FileStore, uploads: Uploads, file_id: str, who: Principal) -> FileDeleted:
    """Delete the file and its record; a 409 while a queued or running job reads it."""
    row = visible(files, file_id, who)
    user = files.user(row.id)
    if user is not None:
        raise Conflict(f"file {file_id} is used by {user}; cancel it or wait for it to end")
    # The row first: from then on no new job can resolve the id to the stored file.
    if files.delete(row.id):
        uploads.remove(row.location)
    return FileDeleted(id=row.id, deleted=True)
