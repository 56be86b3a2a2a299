"""What every dashboard route needs: the templates, the signed-in viewer (or a redirect to
the login page), and the CSRF gate on state-changing requests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from service.deps import GateDep
from service.store import Principal, Scope
from service.web.session import (
    COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    Session,
    SessionCodec,
    same_origin,
)

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")


class LoginRequired(Exception):
    """No live session: the handler sends the browser to the login page, then back."""

    def __init__(self, next_path: str):
        self.next_path = next_path


class CrossSiteRefused(Exception):
    """A state-changing request without our CSRF token or from another origin."""


@dataclass
class Viewer:
    principal: Principal
    session: Session
    csrf: str  # the token this session's forms and fetches carry

    def may(self, scope: Scope) -> bool:
        return self.principal.allows(scope)


def codec(request: Request) -> SessionCodec:
    found: SessionCodec = request.app.state.web_sessions
    return found


def own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"


async def viewer(request: Request, gate: GateDep) -> Viewer:
    """The session's principal, looked up by its token on every request (a revoked token
    ends the session at once, give or take the token cache's seconds)."""
    sessions = codec(request)
    session = sessions.read(request.cookies.get(COOKIE))
    principal = None
    if session is not None:
        found, principal = gate.cached_principal(session.token)
        if not found:
            principal = await run_in_threadpool(gate.authenticate, session.token)
    if session is None or principal is None or not principal.allows("read"):
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise LoginRequired(path)
    return Viewer(principal, session, sessions.csrf_token(session))


ViewerDep = Annotated[Viewer, Depends(viewer)]


async def checked_form(request: Request, who: ViewerDep) -> dict[str, str]:
    """The posted form of a state-changing request, once its CSRF token and its origin are
    ours; anything else raises CrossSiteRefused (403)."""
    form = await request.form()
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    presented = request.headers.get(CSRF_HEADER) or fields.get(CSRF_FIELD)
    origin_ok = same_origin(
        own_origin(request), request.headers.get("origin"), request.headers.get("referer")
    )
    if not origin_ok or not codec(request).csrf_ok(who.session, presented):
        raise CrossSiteRefused()
    return fields


FormDep = Annotated[dict[str, str], Depends(checked_form)]


def page(
    request: Request, template: str, who: Viewer | None, /, status_code: int = 200, **context: Any
) -> HTMLResponse:
    """Render a template with what every page shows (who is signed in, the CSRF token)."""
    return templates.TemplateResponse(
        request,
        template,
        {"who": who, "csrf": who.csrf if who else "", **context},
        status_code=status_code,
        headers={"Cache-Control": "no-store"},
    )


def login_url(next_path: str) -> str:
    return f"/ui/login?next={quote(next_path, safe='')}"
