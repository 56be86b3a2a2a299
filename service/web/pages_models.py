"""Registry (models, versions with lineage and checksums, aliases moved after a
confirmation) and Ask (a question to a served version through the serving app, with the
session's own token: the same admission and ownership as a REST caller)."""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from service.deps import RegistryDep, SettingsDep
from service.errors import Forbidden, InvalidRequest
from service.platform.charts import histogram
from service.registry import ALIAS_PATTERN
from service.registry import use_cases as ops
from service.web.deps import FormDep, ViewerDep, page
from service.web.messages import shown

log = logging.getLogger(__name__)
router = APIRouter(prefix="/ui", include_in_schema=False)
ASK_TIMEOUT_S = 120.0  # a first question loads the version into a replica


def _models(registry: RegistryDep, who: ViewerDep) -> list[Any]:
    """As GET /v1/models: the caller's models, everyone's for an admin."""
    return [
        (listing, ops.versions(registry, listing))
        for listing in ops.listings(registry, who.principal)
    ]


@router.get("/models", response_class=HTMLResponse)
def models_page(
    request: Request, registry: RegistryDep, who: ViewerDep, msg: str = ""
) -> HTMLResponse:
    return page(
        request, "models.html", who, models=_models(registry, who), msg=shown(msg),
        data=data_label,
    )  # fmt: skip


def data_label(dataset: dict[str, Any]) -> str:
    """A version's data identity in one line: the task and what makes its data that data."""
    keys = ("modules", "path", "file", "sha256", "train_size", "seed", "split")
    shown = [
        f"{k} {','.join(map(str, v)) if isinstance(v, list) else str(v)[:16]}"
        for k in keys
        if (v := dataset.get(k)) not in (None, "", [])
    ]
    return f"{dataset.get('task', '?')}" + (f" ({'; '.join(shown)})" if shown else "")


@router.post("/models/{name}/alias", response_model=None)
def move_alias(
    name: str, request: Request, registry: RegistryDep, who: ViewerDep, form: FormDep
) -> Response:
    """First post: a confirmation page naming where the alias points now and where it
    would point. Only the second post (confirmed=yes) moves it, as PUT /v1/models does."""
    if not who.may("submit"):
        raise Forbidden("this token lacks the 'submit' scope")
    listing = ops.visible(registry, name, who.principal)
    alias = form.get("alias", "").strip()
    try:
        version = int(form.get("version", ""))
    except ValueError as error:
        raise InvalidRequest([{"field": "version", "message": "a version number"}]) from error
    if not re.fullmatch(ALIAS_PATTERN, alias):
        message = "a letter, then up to 62 letters, digits, '.', '_' or '-'"
        raise InvalidRequest([{"field": "alias", "message": message}])
    if form.get("confirmed") != "yes":
        current = listing.aliases.get(alias)
        return page(
            request, "confirm_alias.html", who, name=name, alias=alias, version=version,
            current=current,
        )  # fmt: skip
    ops.set_alias(registry, name, alias, version, who.principal)
    return RedirectResponse("/ui/models?msg=alias_moved", status_code=303)


@router.get("/ask", response_class=HTMLResponse)
def ask_page(
    request: Request, registry: RegistryDep, who: ViewerDep, model: str = ""
) -> HTMLResponse:
    return page(request, "ask.html", who, refs=_refs(registry, who), form={"model": model},
                answer=None, error=None)  # fmt: skip


def _refs(registry: RegistryDep, who: ViewerDep) -> list[str]:
    refs = []
    for listing in ops.listings(registry, who.principal):
        name = listing.model.name
        refs += [f"{name}@{a}" for a in sorted(listing.aliases)]
        refs += [f"{name}:{v.version}" for v in reversed(listing.versions)]
    return refs


@router.post("/ask", response_class=HTMLResponse)
async def ask(
    request: Request, registry: RegistryDep, settings: SettingsDep, who: ViewerDep, form: FormDep
) -> HTMLResponse:
    """Send the question to the serving app's /v1/predict as the signed-in token."""
    body = {
        "model": form.get("model", ""),
        "prompts": [form.get("question", "")],
        "samples": _int(form.get("samples"), 16),
        "temperature": _float(form.get("temperature"), 1.0),
        "max_new_tokens": _int(form.get("max_new_tokens"), 8),
    }
    if form.get("seed", "").strip():
        body["seed"] = _int(form.get("seed"), 0)
    answer, error = None, None
    try:
        async with httpx.AsyncClient(timeout=ASK_TIMEOUT_S) as client:
            reply = await client.post(
                f"{settings.serving_url}/v1/predict",
                json=body,
                headers={"Authorization": f"Bearer {who.session.token}"},
            )
        if reply.status_code == 200:
            data = reply.json()
            answer = data["predictions"][0] | {"ref": data["ref"], "note": data["samples_used_for"]}
            answer["histogram"] = histogram(
                answer.get("sampled_values") or [],
                f"{answer['parsed_samples']} of {answer['samples']} samples",
                marks={"answer": answer["value"], "expected": answer["expected_value"]},
                band=tuple(answer["interval"]) if answer.get("interval") else None,
            )
        else:
            error = f"{reply.status_code}: {reply.text[:500]}"
    except (httpx.HTTPError, ValueError) as failure:
        log.warning("ask: serving at %s failed: %s", settings.serving_url, failure)
        error = f"the serving app did not answer: {failure}"
    return page(request, "ask.html", who, refs=_refs(registry, who), form=form,
                answer=answer, error=error)  # fmt: skip


def _int(value: str | None, default: int) -> int:
    try:
        return int(value or default)
    except ValueError:
        return default


def _float(value: str | None, default: float) -> float:
    try:
        return float(value or default)
    except ValueError:
        return default
