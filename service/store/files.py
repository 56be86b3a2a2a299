"""Queries on uploaded files: add, read, list and delete (the only SQL on `files`)."""

from __future__ import annotations

from sqlalchemy import delete, func, or_, select

from service.jobs.states import ACTIVE
from service.store.db import Database
from service.store.schema import FileRow, JobRow, UnreadableSpecError


def _file_ids(job: JobRow) -> set[str]:
    """The uploaded files a job (or every trial of a sweep) reads: its JSONL files and the
    images its rows name (pinned at submit). Nothing for a spec that does not validate: such
    a job is refused before it runs, and reads nothing."""
    try:
        data = job.job_spec.data
    except UnreadableSpecError:
        return set()
    return {f for f in (data.file, data.eval_file) if f} | set(data.images or {})


class FileStore:
    def __init__(self, db: Database):
        self.db = db

    def add(self, row: FileRow) -> FileRow:
        with self.db.session() as s:
            s.add(row)
        return row

    def get(self, file_id: str, owner: str | None = None) -> FileRow | None:
        """The file, or None if it does not exist or belongs to someone else (owner given)."""
        with self.db.session() as s:
            row = s.get(FileRow, file_id)
        return None if row is None or (owner is not None and row.owner != owner) else row

    def page(
        self, owner: str | None, limit: int, after: FileRow | None = None
    ) -> tuple[list[FileRow], bool]:
        """Newest first, from the file after `after`; and whether more follow."""
        query = select(FileRow)
        if owner is not None:
            query = query.where(FileRow.owner == owner)
        if after is not None:
            query = query.where(
                or_(
                    FileRow.created_at < after.created_at,
                    (FileRow.created_at == after.created_at) & (FileRow.id < after.id),
                )
            )
        query = query.order_by(FileRow.created_at.desc(), FileRow.id.desc()).limit(limit + 1)
        with self.db.session() as s:
            rows = list(s.scalars(query))
        return rows[:limit], len(rows) > limit

    def user(self, file_id: str) -> str | None:
        """A queued, submitted or running job that reads the file, if any. Scanned in
        Python: the active jobs are few, and JSON queries differ between dialects."""
        with self.db.session() as s:
            found = s.scalars(select(JobRow).where(JobRow.status.in_(ACTIVE)))
            return next((job.id for job in found if file_id in _file_ids(job)), None)

    def used(self, owner: str) -> int:
        """Bytes of all the owner's files."""
        with self.db.session() as s:
            return int(s.scalar(select(func.sum(FileRow.bytes)).where(FileRow.owner == owner)) or 0)

    def delete(self, file_id: str) -> bool:
        with self.db.session() as s:
            done = s.execute(delete(FileRow).where(FileRow.id == file_id))
        return bool(done.rowcount)  # type: ignore[attr-defined]
