"""/v1/files: upload a JSONL training file (multipart, `purpose=fine-tune`) or an image
(`purpose=vision`: PNG, JPEG, GIF, BMP or WEBP, checked as every image numtune reads), list,
read and delete your files. A job names a JSONL file by id (data.file, or `training_file`
of /v1/fine_tuning/jobs) and a row names an image by id ("image": "file-…"); the service
resolves them to stored locations at submit. A served request names an image by id too.
Wiring only: the use cases are `service/files/use_cases.py`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from jobs.spec import FILE_ID
from service.auth.callers import Reader, Submitter
from service.deps import FilesDep, SettingsDep, UploadsDep
from service.errors import InvalidRequest
from service.files import use_cases as ops
from service.files.schemas import FileDeleted, FileList, FileOut

# vision: OpenAI's purpose name for images; table: a CSV or JSONL table (data.task table)
PURPOSES = ("fine-tune", "vision", "table")
router = APIRouter(prefix="/v1/files", tags=["files"])
FileId = Annotated[str, Path(pattern=FILE_ID)]
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


@router.post("", status_code=201, response_model=FileOut, openapi_extra=UPLOAD_BODY)
async def upload_file(
    request: Request,
    files: FilesDep,
    uploads: UploadsDep,
    settings: SettingsDep,
    who: Submitter,
) -> FileOut:
    """Upload JSONL rows ({"prompt", "answer"} or chat {"messages"}), purpose fine-tune:
    every row is checked, and a bad one is a 422 naming file and line; or one image, purpose
    vision (at most 4 MB and 2048 pixels a side); or a table, purpose table (CSV with a
    header line, or JSONL of flat objects; UTF-8; a bad row is a 422 naming row and line):
    anything else is a 422 naming file. A
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
        quota = settings.owner_quota_bytes
        received = (upload.filename, upload.file)
        return await run_in_threadpool(ops.receive, files, uploads, quota, who, received, purpose)


@router.get("", response_model=FileList)
def list_files(
    files: FilesDep,
    who: Reader,
    after: Annotated[str | None, Query(pattern=FILE_ID)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> FileList:
    """Newest first; pass the last id as `after` for the next page."""
    rows, more = ops.listing(files, who, after, limit)
    return FileList(data=[FileOut.of(r) for r in rows], has_more=more)


@router.get("/{file_id}", response_model=FileOut)
def get_file(file_id: FileId, files: FilesDep, who: Reader) -> FileOut:
    return FileOut.of(ops.visible(files, file_id, who))


@router.delete("/{file_id}", response_model=FileDeleted)
def delete_file(
    file_id: FileId, files: FilesDep, uploads: UploadsDep, who: Submitter
) -> FileDeleted:
    """Delete the file and its record; a 409 while a queued or running job reads it."""
    return ops.delete(files, uploads, file_id, who)
