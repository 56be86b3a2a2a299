"""The dashboard under /ui: session setup, static files, login/logout, and the pages'
routers (jobs and sweeps: pages_jobs.py; registry and Ask: pages_models.py; the
accuracy study: pages_study.py). None of
it is in the OpenAPI schema: it is HTML for browsers, not API."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from service.deps import GateDep
from service.settings import Settings
from service.web import pages_jobs, pages_models, pages_study
from service.web.deps import (
    HERE,
    CrossSiteRefused,
    FormDep,
    LoginRequired,
    codec,
    login_url,
    own_origin,
    page,
)
from service.web.session import COOKIE, SessionCodec, safe_next, same_origin

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("")
async def home() -> RedirectResponse:
    return RedirectResponse("/ui/jobs", status_code=303)


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, next: str = "/ui/jobs") -> HTMLResponse:
    return page(request, "login.html", None, next=safe_next(next), error=None)


@router.post("/login")
async def login(
    request: Request,
    gate: GateDep,
    token: Annotated[str, Form(max_length=500)],
    next: Annotated[str, Form(max_length=2000)] = "/ui/jobs",
) -> Response:
    """Check the pasted token against the token store (the API's own lookup), then set the
    session cookie. Login has no session yet to hold a CSRF token: the origin check stops
    a foreign page from logging a browser into someone else's account."""
    if not same_origin(
        own_origin(request), request.headers.get("origin"), request.headers.get("referer")
    ):
        return PlainTextResponse("cross-site request refused", status_code=403)
    principal = await run_in_threadpool(gate.authenticate, token.strip())
    if principal is None or not principal.allows("read"):
        return page(
            request,
            "login.html",
            None,
            next=safe_next(next),
            error="unknown or revoked token",
            status_code=401,
        )
    sessions = codec(request)
    _, cookie = sessions.issue(token.strip())
    response = RedirectResponse(safe_next(next), status_code=303)
    response.set_cookie(COOKIE, cookie, **sessions.cookie_attributes())  # type: ignore[arg-type]
    return response


@router.post("/logout")
async def logout(request: Request, form: FormDep) -> RedirectResponse:
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


async def _to_login(request: Request, error: Exception) -> Response:
    assert isinstance(error, LoginRequired)
    if request.method != "GET" or request.headers.get("x-requested-with") == "fetch":
        # A polled fragment or a form post: the script reloads into the login page.
        return PlainTextResponse("login required", status_code=401)
    return RedirectResponse(login_url(error.next_path), status_code=303)


async def _refused(request: Request, error: Exception) -> Response:
    return PlainTextResponse("cross-site request refused", status_code=403)


def install(app: FastAPI, settings: Settings, session_key: str) -> None:
    """Mount the dashboard on `app`: cookies Secure unless the service is on loopback (a
    browser on plain http://127.0.0.1 would otherwise never send them back)."""
    # build_services always sets a key; without one (an app put together by hand) a
    # random one, never a known empty key.
    key = session_key or secrets.token_urlsafe(32)
    app.state.web_sessions = SessionCodec(key, secure=not settings.on_loopback)
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
    app.add_exception_handler(LoginRequired, _to_login)
    app.add_exception_handler(CrossSiteRefused, _refused)
    for r in (router, pages_jobs.router, pages_models.router, pages_study.router):
        app.include_router(r)
