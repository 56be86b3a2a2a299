"""Where a run's files live: a local folder or any pyarrow filesystem URI (s3://, gs://).

A run owns `<storage_root>/runs/<job_id>/`: Ray Train's checkpoints (under `train/`),
`metrics.jsonl` (one reported row per line) and `result.json` (written once, at the end).
The control plane reads these; nothing here imports Ray or the service.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

from jobs.paths import storage_root

JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class RunFiles:
    """The files of one run, on whichever filesystem the storage root names."""

    fs: pafs.FileSystem
    root: str  # path inside `fs` of runs/<job_id>
    uri: str  # the same, as the user-facing URI or local path

    @classmethod
    def for_job(cls, job_id: str, storage: str | None = None) -> RunFiles:
        if not JOB_ID.match(job_id) or ".." in job_id:
            raise ValueError(f"job id {job_id!r}: use letters, digits, '.', '_' and '-' only")
        base = storage or storage_root()
        fs, path = pafs.FileSystem.from_uri(base if "://" in base else os.path.abspath(base))
        root = f"{path.rstrip('/')}/runs/{job_id}"
        fs.create_dir(root, recursive=True)
        uri = base.rstrip("/") + f"/runs/{job_id}"
        return cls(fs, root, uri)

    def write_text(self, name: str, text: str) -> None:
        # Write to a temporary name then move, so readers never see half a file.
        tmp = f"{self.root}/.{name}.tmp"
        with self.fs.open_output_stream(tmp) as out:
            out.write(text.encode("utf-8"))
        self.fs.move(tmp, f"{self.root}/{name}")

    def read_text(self, name: str) -> str | None:
        path = f"{self.root}/{name}"
        if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
            return None
        with self.fs.open_input_stream(path) as inp:
            return bytes(inp.readall()).decode("utf-8")

    def write_json(self, name: str, obj: Any) -> None:
        self.write_text(name, json.dumps(obj, indent=2, sort_keys=True) + "\n")

    def read_json(self, name: str) -> Any:
        text = self.read_text(name)
        return None if text is None else json.loads(text)
