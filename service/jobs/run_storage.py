"""Run folders (`<storage>/runs/<job id>`: checkpoints, metrics, predictions; 41 MB for a
tiny job) as part of an owner's storage: deleting a job deletes its folder unless a study
still names it, and the bytes of every run folder of an owner count against their storage
quota beside their uploaded files (service/settings.py owner_quota_bytes).

The size of an ended job's folder no longer changes (registration copies out of it, nothing
writes in), so it is measured once per process; a running job's is measured each time.
"""

from __future__ import annotations

import logging
import os
import threading

import pyarrow.fs as pafs

from service.store import Database
from service.store.run_refs import owner_jobs, studies_naming

log = logging.getLogger(__name__)
_ENDED_SIZES: dict[str, int] = {}  # job id -> bytes of its ended run folder
_SIZES_MAX = 100_000
_LOCK = threading.Lock()


class RunStorage:
    def __init__(self, storage_root: str, db: Database):
        self.uri = storage_root if "://" in storage_root else os.path.abspath(storage_root)
        self.fs, base = pafs.FileSystem.from_uri(self.uri)
        self.base = base.rstrip("/")
        self.db = db

    def folder(self, job_id: str) -> str:
        return f"{self.base}/runs/{job_id}"

    def size(self, job_id: str) -> int:
        """Bytes of every file in the job's run folder (0 when it has none)."""
        selector = pafs.FileSelector(self.folder(job_id), recursive=True, allow_not_found=True)
        infos = self.fs.get_file_info(selector)
        return sum(i.size or 0 for i in infos if i.type == pafs.FileType.File)

    def used(self, owner: str) -> int:
        """Bytes of all of `owner`'s run folders."""
        total = 0
        for job_id, ended in owner_jobs(self.db, owner):
            with _LOCK:
                known = _ENDED_SIZES.get(job_id)
            if known is None:
                known = self.size(job_id)
                if ended:
                    with _LOCK:
                        if len(_ENDED_SIZES) >= _SIZES_MAX:
                            _ENDED_SIZES.clear()
                        _ENDED_SIZES[job_id] = known
            total += known
        return total

    def forget(self, job_id: str, owner: str) -> bool:
        """Remove a deleted job's run folder unless one of the owner's studies names the job
        (its result and per-run view read it); True when removed."""
        with _LOCK:
            _ENDED_SIZES.pop(job_id, None)
        naming = studies_naming(self.db, owner, job_id)
        if naming:
            log.info("kept %s's run folder: study %s names it", job_id, ", ".join(naming))
            return False
        folder = self.folder(job_id)
        if self.fs.get_file_info(folder).type == pafs.FileType.NotFound:
            return False
        self.fs.delete_dir(folder)
        return True
