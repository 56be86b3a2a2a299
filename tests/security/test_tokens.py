"""Issue 14 item 16: weak or placeholder admin tokens are refused, and rotating the
configured admin token (or leaving --dev) ends the old one."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import InsecureSettingsError, Settings, secret_weakness
from tests.security.conftest import auth
from tests.support.stub_backend import StubBackend


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("aaaaaaaaaaaaaaaa", "predictable"),
        ("REPLACE_ME_REPLACE_ME", "placeholder"),
        ("changeme-changeme-123", "placeholder"),
        ("abababababababababababab", "predictable"),
        ("short", "16 characters"),
        # Issue 30 item 10 (L1): 64 bits by character frequency, but a counting sequence
        # and a repeated block.
        ("0123456789abcdef", "predictable"),
        ("abcd" * 8, "predictable"),
    ],
)
def test_weak_admin_tokens_do_not_start_the_service(tmp_path: Path, token: str, why: str) -> None:
    with pytest.raises(InsecureSettingsError, match=why):
        create_app(Settings(home=tmp_path, admin_token=token), backend=StubBackend())


def test_generated_tokens_pass() -> None:
    for _ in range(20):
        assert secret_weakness(secrets.token_urlsafe(32)) is None
        assert secret_weakness(secrets.token_hex(16)) is None


def start(home: Path, **settings: object) -> TestClient:
    app = create_app(Settings(home=home, **settings), backend=StubBackend(), reconcile=False)  # type: ignore[arg-type]
    return TestClient(app)


def test_rotation_and_leaving_dev_end_the_old_token(tmp_path: Path) -> None:
    with start(tmp_path, dev=True) as c:
        dev = (tmp_path / "admin-token").read_text().strip()
        assert c.get("/v1/tokens", headers=auth(dev)).status_code == 200
    first, second = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    with start(tmp_path, admin_token=first) as c:
        assert c.get("/v1/tokens", headers=auth(first)).status_code == 200
        assert c.get("/v1/tokens", headers=auth(dev)).status_code == 401
    with start(tmp_path, admin_token=second) as c:
        assert c.get("/v1/tokens", headers=auth(second)).status_code == 200
        assert c.get("/v1/tokens", headers=auth(first)).status_code == 401
        # Tokens an admin created are not the configured one: they stay.
        made = c.post("/v1/tokens", json={"owner": "ann", "scopes": ["read"]}, headers=auth(second))
        ann = made.json()["token"]
    with start(tmp_path, admin_token=first) as c:  # rotated back: the first is live again
        assert c.get("/v1/tokens", headers=auth(first)).status_code == 200
        assert c.get("/v1/tokens", headers=auth(second)).status_code == 401
        assert c.get("/v1/jobs", headers=auth(ann)).status_code == 200
