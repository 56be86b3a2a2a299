"""/v1/files: upload a JSONL training file (multipart, `purpose=fine-tune`) or an image
(`purpose=vision`: PNG, JPEG, GIF, BMP or WEBP, checked as every image numtune reads), list,
read and delete your files. A job names a JSONL file by id (data.file, or `training_file`
of /v1/fine_tuning/jobs) and a row names an image by id ("image": "file-…"); the service
resolves them to stored locations at submit. A served request names an image by id too."""

from __future__ import annotations

import os
import secrets
import threading
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.exc import SQLAlchemyError
from starlette.datastructures import UploadFile

from jobs.spec import FILE_ID
from service.api.deps import Reader, Services, ServicesDep, Submitter
from service.confinement import FileResolver
from service.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge, QuotaExceeded
from service.file_schemas import FileDeleted, FileList, FileOut
from service.store import FileRow, Principal
from service.store.jobs import now
from service.uploads import BadRowsError, OverQuotaError, TooLargeError

PURPOSES = ("fine-tune", "vision")  # vision: OpenAI's purpose name for images
router = APIRouter(prefix="/v1/files", tags=["files"])
FileId = Annotated[str, Path(pattern=FILE_ID)]
OWNER_LOCKS: dict[str, threading.Lock] = {}
# The body is multipart, read after the token is checked (not by FastAPI before it):
# documented here since no parameter declares it.
UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file", "purpose"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "purpose": {"type": "string", "enum": list(PURPOSES)},
                    },
                }
            }
        },
    }
}


def visible(services: Services, file_id: str, who: Principal) -> FileRow:
    """The file if the caller may see it; else 404 (another owner's file reads as missing)."""
    row = services.files.get(file_id, None if who.is_admin else who.owner)
    if row is None:
        raise NotFound(f"no file {file_id!r}")
    return row


def resolver(services: Services, who: Principal) -> FileResolver:
    """What a job spec's file ids (fine-tune) and its rows' image ids (vision) resolve to
    for this caller: confined stored locations of files uploaded for that purpose."""

    def resolve(file_id: str, purpose: str) -> str | None:
        row = services.files.get(file_id, None if who.is_admin else who.owner)
        if row is None or row.purpose != purpose:
            return None
        return services.uploads.confined(row.location, row.owner)

    return resolve


def receive(services: Services, who: Principal, upload: UploadFile, purpose: str) -> FileOut:
    """Store, check and record one upload (blocking: run in the threadpool). One owner's
    uploads take turns, so that the quota left is read with no other upload of theirs
    half-way."""
    with OWNER_LOCKS.setdefault(who.owner, threading.Lock()):  # setdefault is atomic
        return _receive(services, who, upload, purpose)


def _receive(services: Services, who: Principal, upload: UploadFile, purpose: str) -> FileOut:
    file_id = f"file-{secrets.token_hex(12)}"
    name = os.path.basename(upload.filename or "")[:255] or "upload"
    image = purpose == "vision"
    left = services.settings.owner_quota_bytes - services.files.used(who.owner)
    try:
        stored = services.uploads.store(who.owner, file_id, upload.file, name, image, left)
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
        services.files.add(row)
    except SQLAlchemyError:
        services.uploads.remove(stored.location)  # no file without its row
        raise
    return FileOut.of(row)


@router.post("", status_code=201, response_model=FileOut, openapi_extra=UPLOAD_BODY)
async def upload_file(request: Request, services: ServicesDep, who: Submitter) -> FileOut:
    """Upload JSONL rows ({"prompt", "answer"} or chat {"messages"}), purpose fine-tune:
    every row is checked, and a bad one is a 422 naming file and line; or one image, purpose
    vision (at most 4 MB and 2048 pixels a side): anything else is a 422 naming file. A
    file past the owner's storage quota (all their files together) is a 413
    quota_exceeded. A refused upload records nothing."""
    async with request.form(max_files=1, max_fields=2) as form:
        upload, purpose = form.get("file"), form.get("purpose")
        problems = []
        if not isinstance(upload, UploadFile):
            problems.append({"field": "file", "message": "attach the file as a file part"})
        if purpose not in PURPOSES:
            problems.append({"field": "purpose", "message": f"must be one of {PURPOSES}"})
        if problems or not isinstance(upload, UploadFile) or not isinstance(purpose, str):
            raise InvalidRequest(problems)
        return await run_in_threadpool(receive, services, who, upload, purpose)


@router.get("", response_model=FileList)
def list_files(
    services: ServicesDep,
    who: Reader,
    after: Annotated[str | None, Query(pattern=FILE_ID)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> FileList:
    """Newest first; pass the last id as `after` for the next page."""
    start = visible(services, after, who) if after is not None else None
    rows, more = services.files.page(None if who.is_admin else who.owner, limit, start)
    return FileList(data=[FileOut.of(r) for r in rows], has_more=more)


@router.get("/{file_id}", response_model=FileOut)
def get_file(file_id: FileId, services: ServicesDep, who: Reader) -> FileOut:
    return FileOut.of(visible(services, file_id, who))


@router.delete("/{file_id}", response_model=FileDeleted)
def delete_file(file_id: FileId, services: ServicesDep, who: Submitter) -> FileDeleted:
    """Delete the file and its record; a 409 while a queued or running job reads it."""
    row = visible(services, file_id, who)
    user = services.files.user(row.id)
    if user is not None:
        raise Conflict(f"file {file_id} is used by {user}; cancel it or wait for it to end")
    # The row first: from then on no new job can resolve the id to the stored file.
    if services.files.delete(row.id):
        services.uploads.remove(row.location)
    return FileDeleted(id=row.id, deleted=True)
