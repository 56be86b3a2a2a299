"""The dashboard's browser session and CSRF checks (no FastAPI in here: unit-testable).

A session is one cookie: the pasted API token, a random nonce and the time of login,
encrypted and authenticated with Fernet under a key from settings. Encrypted, not only
signed, because the token is what the dashboard needs to call the serving port on the
user's behalf (Ask), and a cookie copied out of a browser profile should not reveal it.
Nothing lives in one process's memory, so any number of API workers share sessions; the
token is looked up on every request, so revoking it ends every session made with it.

CSRF: every state-changing request must carry `csrf_token(nonce)` (a form field or the
X-CSRF-Token header) and, when the browser sends one, an Origin (else Referer) equal to
the dashboard's own origin. SameSite=Strict alone already keeps the cookie off cross-site
requests; the token and the origin check do not rely on the browser for that.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken

COOKIE = "numtune_session"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
MAX_AGE_S = 12 * 3600  # a session ends after this even while its token lives


@dataclass(frozen=True)
class Session:
    token: str  # the API token pasted at login (checked against the token store per request)
    nonce: str  # this session's random id: its CSRF token derives from it
    issued_at: float


def _derive(key: str, purpose: str) -> bytes:
    """Separate keys per purpose from one configured secret."""
    return hashlib.sha256(f"numtune-web:{purpose}:{key}".encode()).digest()


class SessionCodec:
    """Turns a Session into a cookie value and back; knows the cookie's attributes."""

    def __init__(self, key: str, *, secure: bool, max_age_s: int = MAX_AGE_S) -> None:
        self._fernet = Fernet(base64.urlsafe_b64encode(_derive(key, "session")))
        self._csrf_key = _derive(key, "csrf")
        self.secure, self.max_age_s = secure, max_age_s

    def issue(self, token: str, now: float | None = None) -> tuple[Session, str]:
        """A new session for `token` (a fresh nonce at every login) and its cookie value."""
        stamp = time.time() if now is None else now
        session = Session(token=token, nonce=secrets.token_urlsafe(16), issued_at=stamp)
        body = json.dumps({"t": token, "n": session.nonce, "i": stamp}).encode()
        return session, self._fernet.encrypt_at_time(body, int(stamp)).decode()

    def read(self, cookie: str | None, now: float | None = None) -> Session | None:
        """The session in `cookie`, or None if absent, forged, altered or expired."""
        if not cookie:
            return None
        stamp = int(time.time() if now is None else now)
        try:
            body = self._fernet.decrypt_at_time(cookie.encode(), self.max_age_s, stamp)
            data = json.loads(body)
            return Session(token=str(data["t"]), nonce=str(data["n"]), issued_at=data["i"])
        except (InvalidToken, ValueError, KeyError, TypeError):
            return None

    def csrf_token(self, session: Session) -> str:
        return hmac.new(self._csrf_key, session.nonce.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, session: Session, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(self.csrf_token(session), presented)

    def cookie_attributes(self) -> dict[str, object]:
        """For Response.set_cookie: never readable by scripts, never sent cross-site."""
        return {
            "httponly": True,
            "samesite": "strict",
            "secure": self.secure,
            "max_age": self.max_age_s,
            "path": "/ui",
        }


def same_origin(own_origin: str, origin: str | None, referer: str | None) -> bool:
    """Whether a state-changing request came from the dashboard's own pages. Origin wins
    when the browser sends it ("null" from sandboxed or file pages is refused); else the
    Referer's origin; a request with neither is refused (browsers send one on POST)."""
    if origin is not None:
        return origin == own_origin
    if referer:
        parts = urlsplit(referer)
        return f"{parts.scheme}://{parts.netloc}" == own_origin
    return False


def safe_next(path: str | None) -> str:
    """Where to go after login: only a path inside the dashboard (no open redirect)."""
    if path and path.startswith("/ui/") and not path.startswith("//") and "\\" not in path:
        return path
    return "/ui/jobs"
