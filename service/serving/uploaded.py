"""Images a served request names by file id: images the caller uploaded to the control
plane's /v1/files with purpose vision, read by the replica from the same database and
storage (local or a pyarrow URI) the control plane writes.

A caller reads only their own images (an admin any); a missing id, another owner's file and
a JSONL file all get the same 422, so the answer never tells whether someone else's file
exists. The bytes are then checked as an inline image is (service/serving/api.py).
"""

from __future__ import annotations

from jobs.modeling.vision import MAX_IMAGE_BYTES
from service.errors import InvalidRequest
from service.files.uploads import Uploads
from service.serving.api import ImageReader
from service.store import Database, Principal
from service.store.files import FileStore


class UploadedImages:
    def __init__(self, db: Database, storage_root: str):
        self.files = FileStore(db)
        # Reads only: the cap is the image cap (an image upload was held to it already).
        self.uploads = Uploads(storage_root, MAX_IMAGE_BYTES)

    def reader(self, who: Principal) -> ImageReader:
        """Reads `who`'s uploaded images by id (blocking: SQL and storage; off the loop)."""

        def read(file_id: str, field: str) -> bytes:
            row = self.files.get(file_id, None if who.is_admin else who.owner)
            where = None
            if row is not None and row.purpose == "vision":
                # The stored location, only if it is still a file in its owner's folder.
                where = self.uploads.confined(row.location, row.owner)
            if where is None:
                message = f"no image file {file_id!r}: upload one to /v1/files, purpose vision"
                raise InvalidRequest([{"field": field, "message": message}])
            return self.uploads.read(where, MAX_IMAGE_BYTES)

        return read
