"""A route whose JSON body is parsed in a worker thread, not on the event loop.

FastAPI reads a declared body with `await request.json()`, and Starlette's `json()` calls
`json.loads` on the loop: for a body of tens of MiB (a study's kept work) that is half a
second or more in which no other client's request is answered. `OffLoopJSONRoute` hands the
route a request whose `json()` parses in the thread pool; the route's schema, validation
and errors (a malformed body is still FastAPI's 422) are unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response


def parse(body: bytes) -> Any:
    """The body's JSON (a module function, so a test can hold it)."""
    return json.loads(body)


class OffLoopJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = await run_in_threadpool(parse, await self.body())
        return self._json


class OffLoopJSONRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(OffLoopJSONRequest(request.scope, request.receive))

        return route
