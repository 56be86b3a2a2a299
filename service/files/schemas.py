"""The bodies of /v1/files, shaped as OpenAI's file objects (so its client reads them),
with numtune's own fields added: the content's sha256 and its row count."""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, Field

from service.store import FileRow


class FileOut(BaseModel):
    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int = Field(..., description="Unix seconds")
    filename: str
    purpose: Literal["fine-tune", "vision", "table"] = Field(
        "fine-tune",
        description="fine-tune: JSONL training rows; vision: one image; table: CSV or JSONL",
    )
    status: Literal["processed"] = Field(
        "processed", description="always processed: a file is validated before it is recorded"
    )
    sha256: str
    rows: int = Field(..., description="training examples in the file (0 for an image)")

    @classmethod
    def of(cls, row: FileRow) -> FileOut:
        return cls(
            id=row.id,
            bytes=row.bytes,
            created_at=int(row.created_at.timestamp()),
            filename=row.filename,
            purpose=row.purpose,
            sha256=row.sha256,
            rows=row.rows,
        )


T = TypeVar("T")


class ListPage(BaseModel, Generic[T]):
    """One page of an OpenAI-style list (files, fine-tuning jobs, their events and
    checkpoints): the items and whether more follow."""

    object: Literal["list"] = "list"
    data: list[T]
    has_more: bool


FileList = ListPage[FileOut]


class FileDeleted(BaseModel):
    id: str
    object: Literal["file"] = "file"
    deleted: bool
