"""A throwaway PostgreSQL server from Debian's packages, on 127.0.0.1 and a free port.

`.ci/debian-deps.sh` installs the packages when they are missing. With NUMTUNE_TEST_PG_URL
set, that server is used instead. PostgreSQL refuses to run as root, so as root the
cluster belongs to the `postgres` system user.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yield a SQLAlchemy URL of a fresh, empty database."""
    if os.environ.get("NUMTUNE_TEST_PG_URL"):
        yield os.environ["NUMTUNE_TEST_PG_URL"]
        return
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        raise RuntimeError(
            "PostgreSQL server binaries not found: run `bash .ci/debian-deps.sh` (installs "
            "Debian's postgresql) or set NUMTUNE_TEST_PG_URL"
        )
    bindir = os.path.dirname(bins[-1])
    root = tempfile.mkdtemp(prefix="numtune-pg-")
    data = os.path.join(root, "data")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = free_port()
    subprocess.run(
        _as_postgres([f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "numtune", "--no-sync"]),
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(
        _as_postgres(
            [f"{bindir}/pg_ctl", "-D", data, "-o", options, "-l", f"{root}/log", "-w", "start"]
        ),
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql+psycopg://numtune@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            _as_postgres([f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)
