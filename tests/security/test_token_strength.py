"""Issue 45 item 15 (N13): the admin-token check judges strength with zxcvbn as well as
its own estimate, and judges hex or base64 of printable text as that text: the issue's
keyboard walk, passphrase and base64 of a placeholder no longer start the service, and
generated tokens still do."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from service.app import create_app
from service.auth.entropy import decoded_text, secret_weakness
from service.settings import InsecureSettingsError, Settings
from tests.support.stub_backend import StubBackend


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("qwertyuiopasdfghjklzxcvbnm123456", r"predictable \(zxcvbn: about 40 bits"),
        ("correcthorsebatterystaplecorrecthorse", r"predictable \(zxcvbn: about 7\d bits"),
        ("ZmFrZS10b2tlbi1mYWtlLXRva2Vu", "placeholder once decoded"),
        # Hex of a passphrase: as guessable as the passphrase.
        (b"correcthorsebatterystaple".hex(), "predictable once decoded"),
    ],
)
def test_the_issues_tokens_do_not_start_the_service(tmp_path: Path, token: str, why: str) -> None:
    with pytest.raises(InsecureSettingsError, match=why):
        create_app(Settings(home=tmp_path, admin_token=token), backend=StubBackend())


def test_generated_tokens_of_every_usual_form_pass() -> None:
    for _ in range(4):
        for token in (secrets.token_hex(16), secrets.token_urlsafe(32), secrets.token_hex(32)):
            assert secret_weakness(token) is None, token
            assert decoded_text(token) is None  # random bytes are not text
    assert decoded_text("ZmFrZS10b2tlbi1mYWtlLXRva2Vu") == "fake-token-fake-token"
