"""Issue 14 item 4: <home> 0700, the database (and its WAL) and secrets 0600, and a
secret file others could read or plant is refused, not reused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.cli.client import resolve_token
from service.settings import InsecureSettingsError, Settings
from tests.security.conftest import ADMIN, auth
from tests.support.stub_backend import StubBackend


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_home_database_and_dev_token_are_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)  # as an earlier version left it
    app = create_app(Settings(home=home, dev=True), backend=StubBackend(), reconcile=False)
    with TestClient(app) as c:
        token = resolve_token(home)
        assert token and c.get("/v1/jobs", headers=auth(token)).status_code == 200
        c.post("/v1/tokens", json={"owner": "ann", "scopes": ["read"]}, headers=auth(token))
        assert mode(home) == 0o700
        for name in ("numtune.db", "numtune.db-wal", "admin-token"):
            assert mode(home / name) == 0o600, name


def test_an_existing_world_readable_database_is_tightened(tmp_path: Path) -> None:
    db = tmp_path / "numtune.db"
    db.touch(mode=0o644)
    db.chmod(0o644)
    create_app(Settings(home=tmp_path, admin_token=ADMIN), backend=StubBackend())
    assert mode(db) == 0o600


def test_a_readable_or_planted_admin_token_file_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "admin-token"
    token.write_text("nt_dev_" + "k3Vq9Lm2" * 5 + "\n")
    token.chmod(0o644)
    dev = Settings(home=tmp_path, dev=True)
    with pytest.raises(InsecureSettingsError, match="readable by others"):
        create_app(dev, backend=StubBackend())
    with pytest.raises(InsecureSettingsError, match="readable by others"):
        resolve_token(tmp_path)  # the CLI does not send it either
    token.unlink()
    elsewhere = tmp_path / "planted"
    elsewhere.write_text("nt_dev_" + "p7Wx4Rz1" * 5 + "\n")
    elsewhere.chmod(0o600)
    token.symlink_to(elsewhere)
    with pytest.raises(InsecureSettingsError, match="not a link"):
        create_app(dev, backend=StubBackend())


def test_a_home_or_secret_of_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "admin-token"
    token.write_text("nt_dev_" + "k3Vq9Lm2" * 5 + "\n")
    token.chmod(0o600)
    # Files made by this process, judged as if the service ran as another user: what a
    # home or token planted by someone else looks like (chown would need root).
    real = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real + 1)
    with pytest.raises(InsecureSettingsError, match="another user"):
        create_app(Settings(home=tmp_path, admin_token=ADMIN), backend=StubBackend())
    with pytest.raises(InsecureSettingsError, match="another user"):
        resolve_token(tmp_path)
