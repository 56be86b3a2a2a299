"""/v1/tokens: admins create, list and revoke bearer tokens."""

from __future__ import annotations

from fastapi import APIRouter, Response

from service.api.deps import Admin, ServicesDep
from service.errors import NotFound
from service.schemas import TokenCreate, TokenCreated, TokenOut

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])


@router.post("", status_code=201, response_model=TokenCreated)
def create_token(body: TokenCreate, services: ServicesDep, _: Admin) -> TokenCreated:
    """A new token for `owner` with `scopes`; the secret is in this response only."""
    row, secret = services.tokens.create(body.owner, list(body.scopes), body.name)
    return TokenCreated(**TokenOut.of(row).model_dump(), token=secret)


@router.get("", response_model=list[TokenOut])
def list_tokens(services: ServicesDep, _: Admin) -> list[TokenOut]:
    return [TokenOut.of(r) for r in services.tokens.all()]


@router.delete("/{token_id}", status_code=204)
def revoke_token(token_id: str, services: ServicesDep, _: Admin) -> Response:
    if not services.tokens.revoke(token_id):
        raise NotFound(f"no live token {token_id!r}")
    services.gate.forget()  # revocation takes effect now, not after the cache expires
    return Response(status_code=204)
