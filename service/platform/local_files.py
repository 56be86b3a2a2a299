"""Local state kept private to the user the service runs as.

<home> holds every owner's specs, logs and token hashes (the SQLite database) and the
dev admin and Ray tokens: <home> is 0700, the database and secrets 0600. A secret file
that is group/other-readable, a symlink, or owned by another user is refused rather than
used: anyone who could read or plant it could act as admin.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from service.settings import InsecureSettingsError

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dir(path: Path) -> Path:
    """Create `path` (and parents) and make it 0700; refuse one owned by another user."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    info = path.stat()
    if info.st_uid != os.getuid():
        raise InsecureSettingsError(f"{path} belongs to another user (uid {info.st_uid})")
    if stat.S_IMODE(info.st_mode) != PRIVATE_DIR:
        path.chmod(PRIVATE_DIR)
    return path


def check_private_file(path: Path) -> None:
    """Refuse a secret file others could read or replace."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        raise InsecureSettingsError(f"{path} must be a regular file, not a link")
    if info.st_uid != os.getuid():
        raise InsecureSettingsError(f"{path} belongs to another user (uid {info.st_uid})")
    if info.st_mode & 0o077:
        raise InsecureSettingsError(
            f"{path} is readable by others (mode {stat.S_IMODE(info.st_mode):o}); "
            f"chmod 600 it after replacing the secret in it"
        )


def read_secret(path: Path) -> str:
    check_private_file(path)
    return path.read_text().strip()


def write_secret(path: Path, secret: str, *, exclusive: bool = False) -> Path:
    """Write `secret` to `path`, 0600 from the start; an existing file is checked first
    (O_TRUNC keeps its mode) and `exclusive` refuses to replace one at all."""
    private_dir(path.parent)
    if path.exists() or path.is_symlink():
        if exclusive:
            raise FileExistsError(path)
        check_private_file(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    fd = os.open(path, flags | (os.O_EXCL if exclusive else 0), PRIVATE_FILE)
    with os.fdopen(fd, "w") as out:
        out.write(secret + "\n")
    return path
